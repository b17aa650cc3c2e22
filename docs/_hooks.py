"""MkDocs hooks for this site (``hooks:`` in mkdocs.yml; not a page).

The docstrings use Sphinx roles (``:class:`Cache```); Markdown renders the role's name as text
before the code span. Dropping the role keeps the code span: ``Cache``.
"""

import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(?=<code>)")


def on_page_content(html, **kwargs):
    return _ROLE.sub("", html)
