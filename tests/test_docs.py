"""The README and the documentation site say what the code does.

Checks that need nothing but the files and the package: the README is a short front door that
starts with the two commands; every relative link (and its anchor) resolves; the CLI reference
names exactly the commands and options of the real parser; the API reference covers every
public name of ``autotune`` and every ``::: path`` in it imports; every page is in the site's
nav; every module, script, study and test a page names exists; the README's quickstart runs as a
script and prints what the README shows. When MkDocs is installed (the ``docs`` extra, as in CI)
the site is also built with ``--strict``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _repo import ROOT, python, repo_env

import autotune
from autotune.cli._parser import build_parser

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
CLI_PAGE = DOCS / "reference" / "cli.md"
API_PAGE = DOCS / "reference" / "api.md"
MAX_README_LINES = 200

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$", re.M)
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
COMMAND_HEADING = re.compile(r"^## `autotune(?: ([a-z-]+))?`\s*$", re.M)
TUNE_REPR = re.compile(r"^TuneResult\(best: .+, .+ the default, cost .+ s, \d+ trials?\)$")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are examples, not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(title: str) -> str:
    """The anchor Python-Markdown's ``toc`` extension gives a heading (MkDocs' default)."""
    title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
    title = re.sub(r"[^\w\s-]", "", title).strip().lower()
    return re.sub(r"[-\s]+", "-", title)


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found, fenced = set(), False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line)):
            found.add(slug(m.group(2)))
    # mkdocstrings names each object's heading by its full path: `::: a.b.c` -> #a.b.c
    found.update(DIRECTIVE.findall(text))
    return found


def links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text(encoding="utf-8"))) if not re.match(r"[a-z]+:", t)]


# ---------------------------------------------------------------------------- the README


def test_readme_is_a_short_front_door_that_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; the front door keeps to 200"
    head = [line for line in lines[:8] if line.strip()]
    assert head[0].startswith("# "), "README.md starts with its title"
    assert FENCE.match(head[1]), "the first thing under the title is a code block with the two commands"
    assert head[2].split()[:2] == ["make", "demo"] and head[3].split()[:2] == ["make", "test"]
    for section in ("## Install", "## Quickstart", "## The command line"):
        assert any(line.startswith(section) for line in lines), f"README.md lacks {section!r}"
    text = "\n".join(lines)
    assert "pip install" in text and "python 3.11" in text.lower()


def test_readme_and_results_pages_do_not_read_as_a_changelog():
    for page in (README, DOCS / "results" / "index.md"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"\bissue \d+", text, re.I), f"{page.name} cites an issue number"
        assert not re.search(r"\bat [0-9a-f]{7,40}\b|\([0-9a-f]{7,40}\)", text), f"{page.name} cites a commit"


# ---------------------------------------------------------------------------- links


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
            continue
        if page != README and DOCS.resolve() not in dest.parents:
            broken.append(f"{target} (outside docs/: the site cannot link to it)")
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading #{anchor} in {dest.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_every_page_is_in_the_site_nav():
    config = yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))

    def walk(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from walk(value)

    nav = set(walk(config["nav"]))
    on_disk = {str(p.relative_to(DOCS)) for p in pages()}
    assert on_disk - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - on_disk == set(), "nav entries with no page"


# ---------------------------------------------------------------------------- the CLI reference


def visible_options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
        if flag.startswith("--")
    }


def all_options(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_sections() -> dict[str, str]:
    """``command -> its section's text`` from the CLI page (``""``: the top-level ``autotune``)."""
    text = CLI_PAGE.read_text(encoding="utf-8")
    heads = list(COMMAND_HEADING.finditer(text))
    out = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[m.end() : end]
        body = body.split("\n## ", 1)[0]  # a section ends at the next second-level heading
        out[m.group(1) or ""] = body
    return out


def test_the_cli_reference_has_a_section_for_every_command_and_no_other():
    parser = build_parser()
    assert set(cli_sections()) == {""} | set(subcommands(parser))


@pytest.mark.parametrize("command", ["", *subcommands(build_parser())])
def test_the_cli_reference_names_exactly_the_options_of_the_parser(command):
    parser = build_parser()
    sub = subcommands(parser)[command] if command else parser
    documented = set(FLAG.findall(cli_sections()[command]))
    missing = visible_options(sub) - documented - ({"--help"} if command else set())  # documented once, on top
    unknown = documented - all_options(sub)
    where = f"autotune {command}".strip()
    assert not missing, f"docs/reference/cli.md, section `{where}`, does not document {sorted(missing)}"
    assert not unknown, f"docs/reference/cli.md, section `{where}`, names options the parser lacks: {sorted(unknown)}"


def test_every_option_named_anywhere_in_the_docs_exists():
    parser = build_parser()
    known = all_options(parser).union(*(all_options(p) for p in subcommands(parser).values()))
    # Options of other programs the pages quote (pip, make, mkdocs, bench scripts) are no `autotune` option.
    quoted_elsewhere = re.compile(r"(scripts/|pip |mkdocs |make |XLA_FLAGS|--xla_|python -c)")
    for page in [README, *pages()]:
        if page.parent.name == "results":
            continue  # written by the benchmark scripts, with their own options
        for line in page.read_text(encoding="utf-8").splitlines():
            if "autotune" not in line or quoted_elsewhere.search(line):
                continue
            for flag in FLAG.findall(line):
                assert flag in known, f"{page.relative_to(ROOT)} names `{flag}`, which no autotune command has: {line}"


# ---------------------------------------------------------------------------- the API reference


def public_names() -> list[str]:
    names = getattr(autotune, "__all__", None)
    if names is None:  # until __init__ lists them: every public attribute that is no module or helper
        names = [
            n
            for n in dir(autotune)
            if not n.startswith("_") and not inspect.ismodule(getattr(autotune, n)) and n != "lazy_attributes"
        ]
    return sorted(names)


def test_the_api_reference_documents_every_public_name():
    documented = {path.rsplit(".", 1)[-1] for path in DIRECTIVE.findall(API_PAGE.read_text(encoding="utf-8"))}
    missing = set(public_names()) - documented
    assert not missing, f"docs/reference/api.md has no `::: ...` block for {sorted(missing)}"


def test_every_api_reference_path_imports_and_is_the_public_object():
    for path in DIRECTIVE.findall(API_PAGE.read_text(encoding="utf-8")):
        module, _, name = path.rpartition(".")
        obj = getattr(importlib.import_module(module), name)
        assert obj.__doc__, f"{path} has no docstring to show"
        if name in public_names():
            assert getattr(autotune, name) is obj, f"{path} is not autotune.{name}"


# ---------------------------------------------------------------------------- the quickstart


def code_block(text: str, section: str, lang: str) -> str:
    """The first fenced block of ``section`` whose info string is ``lang`` ("" for a bare fence)."""
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    for info, code in re.findall(r"^```(\w*)\n(.*?)^```\s*$", body, re.M | re.S):
        if info == lang:
            return code
    raise AssertionError(f"README.md's {section!r} section has no ```{lang} block")


@pytest.mark.slow
def test_the_readme_quickstart_runs_as_a_script_and_prints_the_short_result(tmp_path):
    text = README.read_text(encoding="utf-8")
    script = tmp_path / "quickstart.py"
    script.write_text(code_block(text, "Quickstart", "python"), encoding="utf-8")
    r = python(script, cwd=tmp_path, env=repo_env(AUTOTUNE_CACHE=str(tmp_path / "cache.db")), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.splitlines()
    shown = code_block(text, "Quickstart", "").splitlines()
    assert len(out) == len(shown), f"the README shows {len(shown)} lines of output, the script printed {out}"
    assert TUNE_REPR.match(out[0]), f"not the short TuneResult line: {out[0]!r}"
    assert TUNE_REPR.match(shown[0]), f"the README's sample output is not the short line: {shown[0]!r}"
    assert out[1:] == shown[1:]


# ---------------------------------------------------------------------------- the site


@pytest.mark.slow
def test_the_site_builds_with_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None:
        pytest.skip("MkDocs is not installed: pip install -e '.[docs]' (CI installs it and builds the site)")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    r = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=repo_env(NO_MKDOCS_2_WARNING="1"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "api" / "index.html").exists()


# ---------------------------------------------------------------------------- the exit status


def test_the_exit_status_page_quotes_the_one_table():
    from autotune.cli import EXIT_STATUS

    text = (DOCS / "reference" / "exit-codes.md").read_text(encoding="utf-8")
    rows = re.findall(r"^- \*\*(.+?)\*\*: (.+)$", text, re.M)
    assert dict(rows) == EXIT_STATUS


def test_every_extra_the_install_sections_name_exists():
    import tomllib

    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    )
    for page in (README, DOCS / "index.md"):
        named = set(re.findall(r"pip install (?:-e )?'\.\[([\w,-]+)\]'", page.read_text(encoding="utf-8")))
        named = {x for group in named for x in group.split(",")}
        assert named, f"{page.name} names no extra"
        assert named <= extras, f"{page.name} names extras pyproject.toml lacks: {sorted(named - extras)}"


# ---------------------------------------------------------------------------- the modules the pages name

DOTTED = re.compile(r"(?<![\w./-])((?:autotune|benchmarks)(?:\.\w+)+)")
PATH = re.compile(r"(?<![\w./-])((?:autotune|benchmarks|scripts|studies|tests)/[\w./*-]*[\w*/])")
# a module of autotune by its short name: `_keys.program_key`, `study/_guard.py`, `select/_tiered.pays`
# (`_x`, one letter, is docs/architecture.md's placeholder in its grammar)
PRIVATE = re.compile(r"`(?!autotune/|benchmarks/)((?:\w+/)*_[a-z]\w+)(?:\.py(?=`))?(?:\.(\w+))?[\w.]*`")
AT_COMMIT = re.compile(r"`?\s+at commit ([0-9a-f]{7,40})\b")  # a removed script, named where it lies


def dotted_missing(dotted: str) -> bool:
    """Whether the longest prefix of ``dotted`` that is a module of this tree lacks the next name."""
    parts = dotted.split(".")
    path, i = ROOT / parts[0], 1
    while i < len(parts) and ((path / parts[i] / "__init__.py").exists() or (path / f"{parts[i]}.py").exists()):
        path, i = path / parts[i], i + 1
    return i < len(parts) and not hasattr(importlib.import_module(".".join(parts[:i])), parts[i])


def path_missing(path: str) -> bool:
    pattern = re.sub(r"\b[A-Z][A-Z_]*\b", "*", path.rstrip("/"))  # studies/NAME.py: a placeholder
    return not any(ROOT.glob(pattern)) and not any(ROOT.glob(pattern + ".py"))


def private_missing(module: str, name: str | None) -> bool:
    at = ROOT / "autotune"
    found = [at / module, at / f"{module}.py"] if "/" in module else [*at.rglob(module), *at.rglob(f"{module}.py")]
    mods = [importlib.import_module(".".join(p.relative_to(ROOT).with_suffix("").parts)) for p in found if p.exists()]
    return not mods or (name is not None and not any(hasattr(m, name) for m in mods))


@functools.cache
def held_at(commit: str, path: str) -> bool:
    """Whether ``commit`` holds ``path`` (true where this clone lacks the commit: a shallow CI checkout)."""
    git = lambda *args: subprocess.run(["git", *args], cwd=ROOT, capture_output=True).returncode == 0  # noqa: E731
    return not git("cat-file", "-e", f"{commit}^{{commit}}") or git("cat-file", "-e", f"{commit}:{path}")


def unresolved(page: Path) -> list[str]:
    """The modules, scripts, studies and tests ``page`` names that this tree lacks. A script that
    left the tree is named once as ``path`` followed by ``at commit C``, which commit C must hold;
    the page may then quote it (``python -m benchmarks.name ...``)."""
    text = page.read_text(encoding="utf-8")
    found = [
        (m.group(1), as_path(m.group(1)), missing, AT_COMMIT.match(text, m.end()))
        for regex, missing, as_path in (
            (DOTTED, dotted_missing, lambda n: n.replace(".", "/") + ".py"),
            (PATH, path_missing, lambda n: n),
        )
        for m in regex.finditer(text)
    ]
    held = {path for _, path, _, at in found if at and held_at(at.group(1), path)}
    bad = [name for name, path, missing, at in found if path not in held and (at or missing(name))]
    return bad + [m.group(1) for m in PRIVATE.finditer(text) if private_missing(m.group(1), m.group(2))]


@pytest.mark.parametrize("page", [README, *pages()], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_and_script_a_page_names_exists(page):
    bad = unresolved(page)
    assert not bad, f"{page.relative_to(ROOT)} names modules or files this tree lacks: {sorted(set(bad))}"


def test_a_made_up_module_or_script_on_a_page_is_caught(tmp_path):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    page = tmp_path / "architecture.md"
    page.write_text(
        "`autotune.select._nope`, `autotune.select._tiered.nope`, benchmarks.nope, `benchmarks/nope.py`,\n"
        "scripts/nope.sh, studies/nope.py, autotune/study/_nope.py.\n\n| rule | `_nope` |\n| rule | `study/_nope` |\n"
        f"`benchmarks/never.py` at commit {head}.\n"
        "These exist: `autotune.select._tiered.pays`, benchmarks.e2e.beside_winner, `benchmarks/bench.py`,\n"
        "`studies/NAME.py`, `_keys.program_key`, `select/_tiered.pays`, `benchmarks/bench.py` at commit "
        f"{head}, `benchmarks/gone.py` at commit 0000000 (a commit this clone lacks), python -m benchmarks.gone.\n",
        encoding="utf-8",
    )
    made_up = "autotune.select._nope autotune.select._tiered.nope benchmarks.nope benchmarks/nope.py scripts/nope.sh"
    made_up += " studies/nope.py autotune/study/_nope.py benchmarks/never.py _nope study/_nope"
    assert unresolved(page) == made_up.split()
    assert private_missing("_keys", "nope") and private_missing("select/_tiered", "nope")
