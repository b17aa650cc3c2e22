"""docs/architecture.md is checked against the code: the layer order and the module list are read
FROM the page's first code block, so a module the page leaves out, a name it lists that does not
exist, or an import against its order (deferred imports count) fails here, naming the module.

The block's grammar (written at the top of the page, for whoever edits it):

- a layer is a line indented by two spaces: its names in the first column (separated by ", ";
  ``_x`` a top-level module, ``pkg/`` a package, ``pkg/sub/`` a subpackage, ``__main__``), then
  two or more spaces and a description; lines indented deeper continue the description;
- a package's own modules are named (``_x``) in its layer's description (a subpackage's on its
  own line); a package may sit on several lines (its ``__init__`` on the first), each of its
  modules named on one of them;
- within a layer, imports go either way (test_package checks there is no cycle);
- a module imports only modules of its own layer or of layers above it.
"""

from __future__ import annotations

import os
import re

import pytest
from _package_graph import imports_of, modules
from _repo import ROOT

PAGE = ROOT / "docs" / "architecture.md"
TOP = "autotune"
_NAME = re.compile(r"(?<![\w./])(_{1,2}[a-z][a-z0-9_]*)")


def parse_layers(text: str) -> list[tuple[list[str], str]]:
    """The page's first code block as layers, top first: (first-column names, full description)."""
    found = re.search(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M)
    assert found, f"{PAGE} has no code block listing the layers"
    layers: list[tuple[list[str], str]] = []
    for line in found.group(1).splitlines():
        if not line.strip():
            continue
        if re.match(r"^  \S", line):
            head, _, rest = line[2:].partition("  ")
            names = [n.strip() for n in head.split(",") if n.strip()]
            layers.append((names, rest.strip()))
        else:
            assert layers and line.startswith("    "), (
                f"{PAGE}: a line of the block is neither a layer nor its continuation: {line!r}"
            )
            names, rest = layers[-1]
            layers[-1] = (names, rest + " " + line.strip())
    return layers


def module_layers() -> tuple[dict[str, int], list[str], list[str]]:
    """(module -> layer index, layer labels, problems): every module of the package placed by the page."""
    mods = modules()
    layers = parse_layers(PAGE.read_text())
    where: dict[str, int] = {}
    labels: list[str] = []
    problems: list[str] = []
    for i, (names, description) in enumerate(layers):
        labels.append(", ".join(names))
        for name in names:
            if name.endswith("/"):
                pkg = f"{TOP}.{name[:-1].replace('/', '.')}"
                if pkg not in mods:
                    problems.append(f"the page lists the package {name}, but {pkg} does not exist")
                    continue
                where.setdefault(pkg, i)  # a package on several lines: its __init__ is on the first
                mentioned = set(_NAME.findall(description))
                for mod in mods:
                    if mod.rsplit(".", 1)[0] == pkg and mod.rsplit(".", 1)[1] in mentioned:
                        if mod in where:
                            problems.append(f"the page names {mod} on two lines of {name}: keep one")
                        where[mod] = i
            else:
                mod = f"{TOP}.{name}"
                if mod not in mods:
                    problems.append(f"the page lists {name}, but {mod} does not exist (no {mod.replace('.', '/')}.py)")
                    continue
                where[mod] = i
    for mod in sorted(mods):
        if mod == TOP or mod in where:
            continue
        parts = mod.split(".")
        if len(parts) == 2:
            problems.append(
                f"the page does not list {mod}: add {parts[1]} to the first column of its layer's line "
                "(or a line of its own) in the code block of docs/architecture.md"
            )
        else:
            problems.append(
                f"the page does not list {mod}: name {parts[-1]} in the description of the "
                f"{'/'.join(parts[1:-1])}/ line "
                "in the code block of docs/architecture.md"
            )
    return where, labels, problems


def test_the_grammar_reads_a_block():
    layers = parse_layers("x\n```\n  _a, _b     first\n               more _c\n  pkg/       _d, _e: things\n```\n")
    assert layers == [(["_a", "_b"], "first more _c"), (["pkg/"], "_d, _e: things")]
    with pytest.raises(AssertionError, match="neither a layer nor its continuation"):
        parse_layers("```\n  _a   first\n _b\n```\n")


def test_every_module_is_on_the_page_and_every_name_on_it_exists():
    _, _, problems = module_layers()
    assert not problems, "docs/architecture.md is out of date:\n" + "\n".join(problems)


def test_every_import_follows_the_order_of_the_page_deferred_imports_counted():
    where, labels, _ = module_layers()
    mods = modules()
    against = []
    for name, path in sorted(mods.items()):
        if name == TOP or name not in where:
            continue  # the package's own __init__ sits above every layer; an unlisted module fails above
        for target, line in sorted(imports_of(name, path, set(mods)).items()):
            if target == TOP:
                against.append(
                    f"{name} ({os.path.relpath(path, ROOT)}:{line}) imports the package autotune itself, whose "
                    "__init__ is above every layer: import the module that defines the name"
                )
            elif target in where and where[target] > where[name]:
                against.append(
                    f"{name} ({os.path.relpath(path, ROOT)}:{line}) imports {target}, which the page puts below "
                    f"it (layer {where[target] + 1} '{labels[where[target]]}' under layer {where[name] + 1} "
                    f"'{labels[where[name]]}')"
                )
    assert not against, "imports against the order of docs/architecture.md:\n" + "\n".join(against)
