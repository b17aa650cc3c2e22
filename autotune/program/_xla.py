"""XLA compile options per function: the catalog, the choice of a config, and the one merge.

A config may carry an :class:`XlaChoice`: a few named XLA options (at most one per group)
that go into the ``compiler_options`` of the function's top-level ``jax.jit`` (options of an
inner jit are not applied). Its notation is ``xla:O1`` or ``xla:O0+nollvm``; the empty
choice is ``xla:default``. The catalog is per platform BY NAME: jaxlib accepts any
``DebugOptions`` field on any backend (an ``xla_gpu_*`` key compiles on CPU and does
nothing), so :func:`offered` only drops what this jaxlib refuses (a field it does not have,
a value it cannot parse), probed once per jaxlib version and device kind by compiling a tiny
function. Options read once per process (:data:`PROCESS_GLOBAL`) are never offered.

Example::

    >>> c = XlaChoice.parse("xla:O0+nollvm")
    >>> str(c), c.flags()
    ('xla:O0+nollvm', {'xla_backend_optimization_level': 0, 'xla_llvm_disable_expensive_passes': True})
    >>> jit_options(XlaChoice.parse("xla:O1"), {"compiler_options": {"xla_backend_optimization_level": 2}})
    {'compiler_options': {'xla_backend_optimization_level': 2}}
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autotune._errors import ConfigError, error_text, warn_user_once

PREFIX = "xla:"
"""The notation's prefix: ``xla:O1``."""
DEFAULT_TEXT = "xla:default"
"""The notation of the empty choice (XLA's own defaults)."""
PARAM = "xla"
"""The Optuna parameter of the XLA dimension (its choices are notation strings)."""
_DEBUG_OPTIONS = "https://github.com/openxla/xla/blob/main/xla/debug_options_flags.cc"
_GPU_DOCS = "https://docs.jax.dev/en/latest/gpu_performance_tips.html"
_GPU_TOOLBOX = "https://docs.nvidia.com/jax-toolbox/performance-profiling/gpu-performance"
# XLA's default command-buffer kinds (debug_options_flags.cc) plus loops: as a compile option the value is the
# whole list (the XLA_FLAGS "+WHILE" modifier form is refused: "'+WHILE' is not a valid enum value").
_COMMAND_BUFFER_LOOPS = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION,WHILE,CONDITIONAL"


@dataclass(frozen=True)
class XlaOption:
    """One named XLA option a config may choose.

    Attributes:
        name: its token in the notation (``"O1"``).
        group: options of one group exclude each other (``"opt-level"``).
        platforms: the JAX platforms it is offered on (``("cpu",)``).
        flags: the ``compiler_options`` it sets on the top-level ``jax.jit``.
        trades: what it trades, in one line.
        source: where it is documented.
    """

    name: str
    group: str
    platforms: tuple[str, ...]
    flags: Mapping[str, Any] = field(hash=False)
    trades: str = ""
    source: str = _DEBUG_OPTIONS


CATALOG: tuple[XlaOption, ...] = (
    # CPU. XLA's default backend level is 3 (DefaultDebugOptionsIgnoringFlags), so O3 is not offered.
    # What each trades, measured: docs/results/xla.md#findings (``python -m benchmarks.xla``).
    XlaOption(
        "O0",
        "opt-level",
        ("cpu",),
        {"xla_backend_optimization_level": 0},
        "LLVM -O0: about half the default's compile, code several times slower: pays at tens of calls",
    ),
    XlaOption(
        "O1",
        "opt-level",
        ("cpu",),
        {"xla_backend_optimization_level": 1},
        "LLVM -O1: less compile on large programs (about the same on small ones), code faster or slower by program",
    ),
    XlaOption(
        "O2",
        "opt-level",
        ("cpu",),
        {"xla_backend_optimization_level": 2},
        "LLVM -O2: a little less compile on large programs, code faster or slower by program (XLA's default is -O3)",
    ),
    XlaOption(
        "nollvm",
        "llvm",
        ("cpu",),
        {"xla_llvm_disable_expensive_passes": True},
        "skips LLVM's expensive passes: alone about no change; with O0 or O1 a little more off the compile",
    ),
    # GPU (names and defaults from debug_options_flags.cc and xla.proto; the JAX GPU performance tips).
    XlaOption(
        "wl-none",
        "while-unroll",
        ("gpu",),
        {"xla_gpu_enable_while_loop_unrolling": "WHILE_LOOP_UNROLLING_NO_UNROLL"},
        "no while-loop unrolling (default AUTO): less compile time, more kernel launches per step",
    ),
    XlaOption(
        "wl-double",
        "while-unroll",
        ("gpu",),
        {"xla_gpu_enable_while_loop_unrolling": "WHILE_LOOP_UNROLLING_DOUBLE_BUFFER"},
        "double-buffers every while loop (AUTO only those with collectives): 2x body, overlap across steps",
    ),
    XlaOption(
        "wl-full",
        "while-unroll",
        ("gpu",),
        {"xla_gpu_enable_while_loop_unrolling": "WHILE_LOOP_UNROLLING_FULL_UNROLL"},
        "fully unrolls while loops of known trip count: compile grows with the trip count, no loop overhead",
    ),
    XlaOption(
        "cb-while",
        "command-buffer",
        ("gpu",),
        {"xla_gpu_enable_command_buffer": _COMMAND_BUFFER_LOOPS, "xla_gpu_graph_min_graph_size": 1},
        "records loops (WHILE, CONDITIONAL) into CUDA graphs: fewer launches, graph capture at first run",
        _GPU_TOOLBOX,
    ),
    XlaOption(
        "cb-unroll",
        "command-buffer",
        ("gpu",),
        {
            "xla_gpu_enable_command_buffer": _COMMAND_BUFFER_LOOPS,
            "xla_gpu_graph_min_graph_size": 1,
            "xla_gpu_command_buffer_unroll_loops": True,
        },
        "unrolls loops of known trip count inside the CUDA graph: larger graph, no device-side loop",
        _GPU_TOOLBOX,
    ),
    XlaOption(
        "cb-off",
        "command-buffer",
        ("gpu",),
        {"xla_gpu_enable_command_buffer": ""},
        "no CUDA graphs: no capture cost, one launch per kernel",
        _GPU_TOOLBOX,
    ),
    XlaOption(
        "at0",
        "autotune",
        ("gpu",),
        {"xla_gpu_autotune_level": 0},
        "no GEMM/fusion autotuning (default level 4): much less compile time, heuristic kernel choice",
    ),
    XlaOption(
        "at1",
        "autotune",
        ("gpu",),
        {"xla_gpu_autotune_level": 1},
        "autotunes without buffer init or result checks: less compile time, the same kernel choice mostly",
    ),
    XlaOption(
        "lhs",
        "scheduler",
        ("gpu",),
        {"xla_gpu_enable_latency_hiding_scheduler": True},
        "the latency-hiding scheduler (default off): overlaps async work, more compile time",
        _GPU_DOCS,
    ),
)
"""Every option a config may choose, per platform (see the module docstring). No TPU option: on a
TPU v5e the generic options changed neither compile nor runtime beyond a no-op option's noise, and
the one that cut compile (``exec_time_optimization_effort=-1``) slowed the code 2.8-12.7x, paying
only below about 80 calls (``python -m benchmarks.tpu_xla_probe``; docs/results/tpu.md)."""

PROCESS_GLOBAL = frozenset(
    {
        "xla_gpu_require_exclusive_lock",
        "xla_gpu_nccl_termination_timeout_seconds",
        "xla_gpu_nccl_init_max_rank_per_root_ratio",
        "xla_gpu_enable_nccl_comm_splitting",
        "xla_gpu_nccl_blocking_communicators",
        "xla_gpu_load_autotune_results_from",
        "xla_gpu_dump_autotune_results_to",
        "xla_gpu_per_fusion_autotune_cache_dir",
        "xla_gpu_experimental_autotune_cache_mode",
        "xla_gpu_cuda_data_dir",
        "xla_force_host_platform_device_count",
        "xla_dump_to",
    }
)
"""Option keys XLA reads once per process (locks, NCCL, autotune results, dumps): never offered."""

_BY_NAME = {o.name: o for o in CATALOG}
assert not any(k in PROCESS_GLOBAL for o in CATALOG for k in o.flags), "a process-global option in CATALOG"


@dataclass(frozen=True, order=True)
class XlaChoice:
    """The XLA options of a config: option names, at most one per group, in catalog order.

    ``str()`` is the notation (``xla:O1``, ``xla:O0+nollvm``, ``xla:default`` when empty),
    :meth:`parse` reads it back and :meth:`flags` merges the options' ``compiler_options``.

    Example::

        >>> XlaChoice(("nollvm", "O0")) == XlaChoice.parse("xla:O0+nollvm"), bool(XlaChoice())
        (True, False)
    """

    names: tuple[str, ...] = ()

    def __post_init__(self):
        names = self.names
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise ConfigError(f"An XLA choice is a list of option names like ['O1'], got {names!r}.")
        names = tuple(names)
        unknown = [n for n in names if n not in _BY_NAME]
        if unknown:
            raise ConfigError(
                f"Unknown XLA option {unknown[0]!r}; the options are {sorted(_BY_NAME)} "
                "(see autotune.program._xla.CATALOG)."
            )
        groups: dict[str, str] = {}
        for n in names:
            g = _BY_NAME[n].group
            if g in groups and groups[g] != n:
                raise ConfigError(f"XLA options {groups[g]!r} and {n!r} are both of group {g!r}; choose one.")
            groups[g] = n
        order = {n: i for i, n in enumerate(_BY_NAME)}  # catalog order
        object.__setattr__(self, "names", tuple(sorted(set(names), key=order.__getitem__)))

    @classmethod
    def parse(cls, text: str | XlaChoice | Sequence[str] | None) -> XlaChoice:
        """Read the notation back: ``"xla:O1"``, ``"xla:O0+nollvm"``, ``"xla:default"`` (also a
        list of names, or None for the empty choice)."""
        if text is None or isinstance(text, XlaChoice):
            return text or cls()
        if not isinstance(text, str):
            return cls(tuple(text))
        s = text.strip()
        if not s.startswith(PREFIX):
            raise ConfigError(f"Cannot read the XLA choice {text!r}; write 'xla:O1', 'xla:O0+nollvm' or 'xla:default'.")
        body = s[len(PREFIX) :].strip()
        if body in ("", "default"):
            return cls()
        return cls(tuple(p.strip() for p in body.split("+")))

    def options(self) -> tuple[XlaOption, ...]:
        return tuple(_BY_NAME[n] for n in self.names)

    def flags(self) -> dict[str, Any]:
        """The ``compiler_options`` of this choice (empty for the default)."""
        out: dict[str, Any] = {}
        for o in self.options():
            out.update(o.flags)
        return out

    def __bool__(self) -> bool:
        return bool(self.names)

    def __str__(self) -> str:
        return PREFIX + "+".join(self.names) if self.names else DEFAULT_TEXT


def jit_options(choice: XlaChoice | None, jit_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """THE merge: ``jit_kwargs`` with ``choice``'s flags added to ``compiler_options``; a key
    the user set in their own ``compiler_options`` wins. Without a choice, ``jit_kwargs``
    unchanged (a copy)."""
    out = dict(jit_kwargs or {})
    if not choice:
        return out
    out["compiler_options"] = {**choice.flags(), **dict(out.get("compiler_options") or {})}
    return out


def options_for(platform: str, catalog: Sequence[XlaOption] = CATALOG) -> tuple[XlaOption, ...]:
    """The catalog's options of a JAX platform (``"cpu"``, ``"gpu"``; ``"cuda"``/``"rocm"`` count as gpu)."""
    plat = "gpu" if gpu_platform(platform) else platform
    return tuple(o for o in catalog if plat in o.platforms)


_probed: dict[tuple, tuple[tuple[XlaOption, ...], tuple[str, ...]]] = {}
_probe_lock = threading.Lock()


def refusal(option: XlaOption) -> str | None:
    """Why XLA refuses ``option`` (its first error line), or None when a tiny function compiles with it."""
    import jax
    import jax.numpy as jnp

    try:
        jax.jit(lambda x: x + 1, compiler_options=dict(option.flags)).lower(jnp.zeros((2,), jnp.float32)).compile()
    except Exception as exc:  # noqa: BLE001 - XLA's INVALID_ARGUMENT and the like: the option is left out
        return error_text(exc)
    return None


def offered(
    platform: str, device_kind: str, catalog: Sequence[XlaOption] | None = None
) -> tuple[tuple[XlaOption, ...], tuple[str, ...]]:
    """``(options, notes)``: the options of ``platform`` this jaxlib accepts, and one note per
    option left out (warned once). Probed once per (jaxlib version, platform, device kind);
    ``catalog`` replaces :data:`CATALOG` (tests give a refused option)."""
    import jaxlib

    pool = options_for(platform, CATALOG if catalog is None else catalog)
    key = (getattr(jaxlib, "__version__", "?"), platform, device_kind, pool)
    with _probe_lock:
        if key not in _probed:
            kept, notes = [], []
            for o in pool:
                why = refusal(o)
                if why is None:
                    kept.append(o)
                else:
                    notes.append(
                        f"XLA option {o.name} ({', '.join(o.flags)}) is left out: this jaxlib refuses it: {why}"
                    )
            _probed[key] = (tuple(kept), tuple(notes))
    kept, notes = _probed[key]
    for note in notes:
        warn_user_once(("xla-refused", key[0], platform, note), f"autotune: {note}")
    return kept, notes


COMBINATIONS = (("O0", "nollvm"), ("O1", "nollvm"))
"""Option sets the XLA dimension offers beside each option alone (where every part is offered):
the only pairs that beat every single option on the CPU programs measured, at few calls, where
``nollvm`` takes a little more off O0's or O1's compile.
Measured: docs/results/xla.md#the-auto-rule-which-compile-share-threshold (``python -m benchmarks.xla``)."""


def choices(options: Sequence[XlaOption]) -> tuple[XlaChoice, ...]:
    """The XLA dimension's values: the default first, then each option alone, then the
    :data:`COMBINATIONS` whose options are all in ``options``."""
    names = {o.name for o in options}
    combined = [XlaChoice(c) for c in COMBINATIONS if names.issuperset(c)]
    return (XlaChoice(), *(XlaChoice((o.name,)) for o in options), *combined)


GPU_PLATFORMS = ("gpu", "cuda", "rocm")
"""The jax platform names of a GPU (where ``TuneOptions.xla="auto"`` searches the options by itself)."""


def gpu_platform(platform: str) -> bool:
    """Whether ``platform`` (a jax platform name) is a GPU."""
    return platform in GPU_PLATFORMS


def catalog_markdown(catalog: Sequence[XlaOption] = CATALOG) -> str:
    """The catalog as a markdown table (the README's list of options)."""
    rows = ["| option | platform | sets | trades | documented |", "| --- | --- | --- | --- | --- |"]
    for o in catalog:
        sets = ", ".join(f"`{k}={v!r}`" for k, v in o.flags.items())
        where = o.source.rstrip("/").rsplit("/", 1)[-1]
        rows.append(f"| `xla:{o.name}` | {'/'.join(o.platforms)} | {sets} | {o.trades} | [{where}]({o.source}) |")
    return "\n".join(rows)
