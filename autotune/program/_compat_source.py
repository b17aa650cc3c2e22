"""Where an equation came from: name scopes, traceback frames, and which files are installed.

Part of the ``_compat`` layer (re-exported there): the JAX internals that source info is read
through, each with a public fallback. A site id names the nearest frame outside installed
packages (``autotune.program._sites``); this module says which frames those are.
"""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from typing import Any

import jax.extend.source_info_util as jex_siu

# autotune/ itself (this module lies in autotune/program/)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Frames inside this package are not "user" frames: a site's source is the
# user's line that called at.loop / lax.scan, not ours.
jex_siu.register_exclusion(_PACKAGE_DIR)


def _module_dir(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    return os.path.dirname(os.path.abspath(module.__file__)) + os.sep


# Where JAX's own machinery lives: a frame there never names a loop. The standard
# library counts too, but not the site-packages folders that may sit inside it.
_JAX_DIRS = tuple(d for d in (_module_dir("jax"), _module_dir("jaxlib"), _PACKAGE_DIR + os.sep) if d)
_STDLIB = sysconfig.get_path("stdlib") or "\0"
_SITE_DIRS = tuple({p for p in (sysconfig.get_path("purelib"), sysconfig.get_path("platlib")) if p})


def _is_machinery(file: str) -> bool:
    return file.startswith(_JAX_DIRS) or (file.startswith(_STDLIB) and not file.startswith(_SITE_DIRS))


# --- where an equation came from ---------------------------------------------------------------


def name_scopes(eqn: Any) -> list[tuple[str, str]]:
    """An equation's name stack, outermost first, as ``[("scope" | "transform", name)]``.

    ``jax.named_scope`` adds a scope; ``jvp``, ``vmap``, ``transpose``... add transforms.
    """
    ns = getattr(getattr(eqn, "source_info", None), "name_stack", None)
    if ns is None:
        return []
    stack = getattr(ns, "stack", None)
    if stack is None:  # private layout moved: read the printed form, "a/jvp(b)/c"
        return [("scope", part) for part in str(ns).split("/") if part]
    return [("transform" if type(el).__name__ == "Transform" else "scope", str(el.name)) for el in stack]


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


def _frames(eqn: Any) -> list[Frame]:
    """Every Python frame of the traceback that created ``eqn``, innermost first."""
    tb = getattr(getattr(eqn, "source_info", None), "traceback", None)
    if tb is None:
        return []
    try:
        from jax._src import source_info_util

        codes, lastis = tb.raw_frames()
        frames = [source_info_util.raw_frame_to_frame(c, i) for c, i in zip(codes, lastis)]
        return [Frame(f.file_name, int(f.start_line), f.function_name) for f in frames]
    except Exception:  # private API moved: the public frame list has the current line
        return [Frame(f.file_name, int(f.line_num), f.function_name) for f in getattr(tb, "frames", ())]


def user_frame(eqn: Any) -> Frame | None:
    """The user's frame that emitted ``eqn`` by JAX's own rule, or None.

    JAX skips its own files, the standard library and paths registered with
    ``register_exclusion`` (this package among them).
    """
    src = getattr(eqn, "source_info", None)
    if src is None or src.traceback is None:
        return None
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(src.traceback)
        return None if frame is None else Frame(frame.file_name, int(frame.start_line), frame.function_name)
    except Exception:  # private API moved: fall back to the public summary
        pass
    try:
        text = jex_siu.summarize(src)
        file, line = text.split(" ")[0].rsplit(":", 2)[:2]
        return Frame(file, int(line), "")
    except Exception:
        return None


def library_frame(eqn: Any) -> Frame | None:
    """The innermost frame outside JAX, jaxlib, autotune and the standard library.

    A loop built by library code JAX treats as excluded (or whose traceback stops at
    a library's own ``jit``) has no user frame, but it does have this one.
    """
    for frame in _frames(eqn):
        if not _is_machinery(frame.file):
            return frame
    return None


def outermost_frame(eqn: Any) -> Frame | None:
    """The outermost recorded frame: for a loop JAX builds inside its own ``jit``ted
    function, that function's entry (e.g. ``polyval``)."""
    frames = _frames(eqn)
    return frames[-1] if frames else None


def frames(eqn: Any) -> list[Frame]:
    """Every frame of ``eqn``'s traceback, innermost first. JAX cuts a traceback where it starts
    tracing a body (a ``jit``, a loop body): the enclosing equation's frames continue it."""
    return _frames(eqn)


# Length of JAX's exclusion list the roots were built for, the (prefix, base) pairs, and
# installed_path's answers under them.
_ROOTS: list[Any] = [-1, [], {}]


def _installed_roots() -> list[tuple[str, str]]:
    """(prefix, base) pairs, site folders first, longest prefix first: site-packages and the
    standard library (of the venv and of the interpreter under it, as Python names them), JAX,
    jaxlib, autotune and every folder given to ``register_exclusion``. Both spellings of a
    symlinked folder count."""
    try:
        from jax._src import source_info_util

        registered = source_info_util._exclude_paths
    except Exception:  # private list moved: the folders below still count
        registered = []
    if _ROOTS[0] == len(registered):  # JAX's list only grows
        return _ROOTS[1]
    import site

    paths = sysconfig.get_paths()
    dirs = [paths.get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")]
    dirs += [os.path.dirname(os.__file__), *getattr(site, "getsitepackages", list)()]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs = [d for d in dirs if d]
    # A site folder names its files from itself, a package folder from its parent ("jax/_src/...").
    pairs = [(d, d) for d in dirs]
    pairs += [(d, os.path.dirname(d.rstrip(os.sep))) for d in (*_JAX_DIRS, *registered)]
    roots: dict[str, tuple[int, str]] = {}
    for rank, (prefix, base) in enumerate(pairs):
        for norm in (os.path.abspath, os.path.realpath):
            p = norm(prefix)
            roots.setdefault(p + os.sep if os.path.isdir(p) else p, (rank >= len(dirs), norm(base)))
    # Site folders first, so a file a library registered is still named from site-packages.
    order = sorted(roots.items(), key=lambda kv: (kv[1][0], -len(kv[0])))
    _ROOTS[:] = [len(registered), [(prefix, base) for prefix, (_, base) in order], {}]
    return _ROOTS[1]


def warm() -> None:
    """Work out the installed folders now (site folders, the standard library, JAX's exclusions),
    so the first lookup of a loop's source does not: the decorator's import thread calls this."""
    _installed_roots()


def installed_path(file: str) -> str | None:
    """``file`` relative to the installed folder it lies in (``flax/core/axes_scan.py``), or
    None for the user's code: a file outside every folder of :func:`_installed_roots`,
    ``<string>`` and ``<stdin>`` included (``<frozen ...>`` modules are the standard library)."""
    if file.startswith("<"):
        return file if file.startswith("<frozen") else None
    roots, known = _installed_roots(), _ROOTS[2]
    if file not in known:
        known[file] = None
        for candidate in (file, os.path.realpath(file)):
            base = next((b for prefix, b in roots if candidate.startswith(prefix)), None)
            if base is not None:
                known[file] = os.path.relpath(candidate, base)
                break
    return known[file]
