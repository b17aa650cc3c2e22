"""Tier-up (``@at.autotuned(tier_up=True)``): never wait for the tuned compile.

A call signature whose cached winner compiles much slower than the default, and for which
serving the default while it compiles costs less at the decorator's ``expected_calls`` than
compiling it up front (`autotune.select._tiered.entry_pays`, on the entry's stored figures), gets
a `Slot`. The decision is made inside the decorator's own trace of its first call (`Tier.decides`):
the one trace that looks the entry up emits the default config for
the decorator's jit, and a daemon thread compiles the winner from the same traced program
(replayed under the winner's config, with its XLA options: `Tier._builder`), so the function is
traced once, as under the plain decorator. Its calls run the default until the executable is
built; the first call after it runs the winner, and so do all later ones. A call never waits for
the background compile (at exit, one under way is joined: see `_join_at_exit`). A signature
without an entry, whose winner compiles about as fast as the default, or for which tiering does
not pay, takes the decorator's usual path.

A background failure leaves the default running for that signature and warns once
(RuntimeWarning). The thread is a daemon; a process that ends while the winner compiles waits
at exit for that compile only (a daemon thread inside XLA at finalization aborts the process),
and one not started yet is skipped. The tiered cost's ``s`` (the default's calls beside a compile) is
measured by the study (`autotune.study._slowdown`).
"""

from __future__ import annotations

import atexit
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import jax

from autotune._errors import error_text, warn_user_once
from autotune.jit._lookup import Lookup
from autotune.jit._routes import call_key
from autotune.jit._target import Target
from autotune.program._jitargs import dynamic_args
from autotune.program._xla import XlaChoice, jit_options
from autotune.select._objective import Objective

__all__ = ["Slot", "Tier"]

_WAITING, _READY, _FAILED = "compiling", "winner", "default (winner failed)"

before_compile: Callable[[Slot], None] | None = None
"""A test hook: called on the background thread before the winner's compile starts (a test makes
it wait on an event, to hold the compile while it calls)."""


_live: set[threading.Thread] = set()  # background compiles still running
_exiting = threading.Event()


@atexit.register
def _join_at_exit() -> None:
    """At exit, let a background compile that has started finish (at most its compile time); one
    that has not started yet does not start. A daemon thread still inside XLA when the interpreter
    finalizes aborts the process ("FATAL: exception not rethrown"), so they are joined here; an
    interrupt during that wait ends the process at once (`_exit_now`), never by finalizing."""
    _exiting.set()
    for thread in list(_live):
        try:
            thread.join()
        except KeyboardInterrupt:  # a second Ctrl-C: the user wants out now
            _exit_now(None)
        except SystemExit as exc:  # a signal handler that calls sys.exit
            _exit_now(exc.code)


def _exit_now(code: Any) -> None:
    """End the process without finalizing the interpreter (a compile is still inside XLA), with the
    status it would have had: killed by SIGINT for ``code`` None (an interrupt), else ``sys.exit``'s.
    Non-daemon threads (the recording writer's among them) have finished before atexit runs, so
    nothing of autotune's is lost; buffered output is flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001, S110 - a closed stream: nothing to flush
            pass
    if code is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 128 + signal.SIGINT  # where the signal is blocked, the shell's status for it
    elif not isinstance(code, int):
        print(code, file=sys.stderr, flush=True)  # as the interpreter prints sys.exit("message")
        code = 1
    os._exit(code)


def _abstract(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arrays as ``ShapeDtypeStruct`` (shape, dtype, weak type, sharding): the
    background lowering holds no buffer a later call may donate or free."""

    def one(x: Any) -> Any:
        if isinstance(x, jax.Array):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding, weak_type=x.weak_type)
        return x

    return jax.tree_util.tree_map(one, (args, kwargs))


class Slot:
    """One tiered call signature: ``default`` (a jit whose trace of this signature emitted the
    default config) serves until ``winner`` (the winner's executable, made by ``build`` on a
    daemon thread) is built; ``state`` is ``"compiling"``, ``"winner"`` or ``"default (winner failed)"``."""

    def __init__(self, tier: Tier, lookup: Any, build: Callable[[], Any], default: Callable[..., Any]):
        self.tier, self.lookup, self.default = tier, lookup, default
        self.state = _WAITING
        self.winner: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.call = self._call_default
        self.thread = threading.Thread(
            target=self._build, args=(build,), name=f"autotune-tier-up {tier.target.key}", daemon=True
        )

    def start(self) -> None:
        """Start the background compile (once)."""
        with self.tier.lock:
            if self.thread.ident is not None or self.thread in _live:
                return
            _live.add(self.thread)
        self.thread.start()

    def _build(self, build: Callable[[], Any]) -> None:
        try:
            if before_compile is not None:
                before_compile(self)
            if _exiting.is_set():
                raise RuntimeError("the process is exiting")
            self.winner = build()
            self.state = _READY
        except BaseException as exc:  # noqa: BLE001 - a background failure: the default keeps serving
            self.error, self.state = exc, _FAILED
        finally:
            _live.discard(threading.current_thread())
            self.done.set()

    def _call_default(self, args: tuple, kwargs: dict) -> Any:
        if self.done.is_set():
            self._settle()
            return self.call(args, kwargs)
        return self.default(*args, **kwargs)

    def _settle(self) -> None:
        """The background compile is over: from now on, calls go to the winner, or stay with the
        default (and one warning) when it failed."""
        if self.state == _READY:
            winner = self.winner
            target = self.tier.target
            if target.has_statics:
                fn, jit_kwargs = target.fun, target.jit_options()

                def call(args: tuple, kwargs: dict) -> Any:
                    dyn, dyn_kw = dynamic_args(fn, args, kwargs, jit_kwargs)
                    return winner(*dyn, **dyn_kw)
            else:

                def call(args: tuple, kwargs: dict) -> Any:
                    return winner(*args, **kwargs)

            self.call = call
            return
        default = self.default
        self.call = lambda args, kwargs: default(*args, **kwargs)
        key = self.tier.target.key
        warn_user_once(
            ("tier-up-failed", key),
            f"autotune: {key}'s tuned config could not be compiled in the background for tier-up "
            f"({error_text(self.error)}); it keeps running its default config. Re-tune it on this machine "
            f"(`autotune tune FILE`), or decorate it without tier_up=True to compile the winner up front.",
        )

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the background compile is over (tests and benchmarks only); True when it is."""
        return self.done.wait(timeout)


class Tier:
    """The tier-up state of one decorated function: per call key (`_routes.call_key`) its `Slot`,
    or None where the decorator's usual path serves it; per traced signature its `Slot`
    (``by_signature``).

    Arguments:
        target: the decorated function, as the decorator was told it.
        objective: the objective it looks up for, whole (read when a signature is decided).
        usual_call: ``(args, kwargs) -> out``, a call down the decorator's usual path (its plain
            jit or XLA route), whose trace of a new signature calls :meth:`decides`.
        lookup: ``(program, signature) -> Lookup``, the decorator's lookup.
        jit_for: ``XlaChoice -> jit``, the decorator's jit compiled with those XLA options.
    """

    def __init__(
        self,
        target: Target,
        objective: Callable[[], Objective],
        usual_call: Callable[[tuple, dict], Any],
        lookup: Callable[[Any, str], Lookup],
        jit_for: Callable[[XlaChoice], Any],
    ):
        self.target, self._objective = target, objective
        self._usual_call, self._lookup, self._jit_for = usual_call, lookup, jit_for
        self.slots: dict[Any, Slot | None] = {}
        self.by_signature: dict[str, Slot] = {}
        self.lock = threading.Lock()
        self._local = threading.local()  # the first call being traced on this thread, and what it decided
        self._default: Any = None

    @property
    def default(self) -> Any:
        """The default config's jit: the function under plain ``jax.jit`` (what the default emits),
        for a signature whose first call was not traced by the decorator (`_untraced`)."""
        if self._default is None:
            self._default = jax.jit(self.target.fun, **self.target.jit_options())
        return self._default

    def call(self, args: tuple, kwargs: dict) -> Any:
        key = call_key(args, kwargs)
        try:
            slot = self.slots[key]
        except (KeyError, TypeError):
            return self._first(key, args, kwargs)
        if slot is None:  # the decorator's usual path
            return self._usual_call(args, kwargs)
        return slot.call(args, kwargs)

    def _first(self, key: Any, args: tuple, kwargs: dict) -> Any:
        """A new call key: the usual path, whose trace of a new signature decides (`decides`);
        a signature traced before under another key finds its slot by signature (`_untraced`)."""
        local = self._local
        local.call, local.traced, local.slot = (args, kwargs), False, None
        try:
            out = self._usual_call(args, kwargs)
        finally:
            local.call = None
        traced, slot = local.traced, local.slot
        if not traced and self.by_signature:  # with nothing tiered, an untraced key has nothing to find
            slot = self._untraced(args, kwargs)
            if slot is not None:
                slot.start()
        if key is not None:
            with self.lock:
                if len(self.slots) >= 1024:  # Python scalars key by value: keep it bounded
                    self.slots = {k: s for k, s in self.slots.items() if s is not None}
                self.slots[key] = slot
        return out

    def decides(self, lookup: Any, program: Any, under: XlaChoice) -> bool:
        """Inside the decorator's trace of a first call through
        :meth:`call`: whether this signature is tiered, so that the trace emits the default config.
        A tiered signature's `Slot` starts here, compiling the winner from ``program``."""
        local = self._local
        call = getattr(local, "call", None)
        if call is None:  # a trace of .lower(), .trace() or a re-trace: the usual config
            return False
        local.traced = True
        try:
            if not qualifying(lookup, self._objective()):
                return False
            with self.lock:
                slot = self.by_signature.get(lookup.signature)
                if slot is None:
                    build = self._builder(program, lookup.config, *call)
                    slot = Slot(self, lookup, build, self._jit_for(under))
                    self.by_signature[lookup.signature] = slot
        except Exception:  # noqa: BLE001 - tier-up is ours: the usual path serves and reports
            return False
        local.slot = slot
        slot.start()  # beside the default's compile, which this trace goes on to
        return True

    def _builder(self, program: Any, config: Any, args: tuple, kwargs: dict) -> Callable[[], Any]:
        """What compiles the winner on the background thread: ``program`` (the decorator's trace)
        replayed under ``config``, jitted with its XLA options and lowered on the call's abstract
        values (no buffer held); the function itself is traced again only when ``config`` gives a
        checkpointed loop body another policy."""
        from autotune.program._rewrite import Plan, evaluate, under_policies
        from autotune.program._sites import split_args

        abstract_args, abstract_kwargs = _abstract(args, kwargs)
        program = under_policies(program, self.target.fun, abstract_args, abstract_kwargs, config)
        plan = Plan(program.sites, config)

        def replay(*a: Any, **k: Any) -> Any:
            leaves, _, dynamic = split_args(a, k)
            out = evaluate(program.jaxpr, [leaves[i] for i in dynamic], plan)
            return jax.tree_util.tree_unflatten(program.out_tree, out)

        jitted = jax.jit(functools.wraps(self.target.fun)(replay), **jit_options(config.xla, self.target.jit_options()))
        return lambda: jitted.lower(*abstract_args, **abstract_kwargs).compile()

    def _untraced(self, args: tuple, kwargs: dict) -> Slot | None:
        """The slot of a new call key whose signature the decorator's jit had traced already (a
        Python scalar of another value, or a ``.lower()`` before the first call): found by its
        signature, or a new one serving the plain ``jax.jit`` when its winner qualifies. Looking the
        signature up traces once more; it is done only while some signature is tiered (so a
        ``.lower()`` before any first call compiles its winner up front)."""
        from autotune.program import _keys

        try:
            program, signature = _keys.program_key(self.target.fun, args, kwargs, self.target.jit_options())
            with self.lock:
                slot = self.by_signature.get(signature)
            if slot is not None:
                return slot
            lookup = self._lookup(program, signature)
            if not qualifying(lookup, self._objective()):
                return None
            with self.lock:
                slot = self.by_signature.get(signature)
                if slot is None:
                    build = self._builder(program, lookup.config, args, kwargs)
                    slot = self.by_signature[signature] = Slot(self, lookup, build, self.default)
            return slot
        except Exception:  # noqa: BLE001 - the usual path serves and reports
            return None

    def slot_for(self, *args: Any, **kwargs: Any) -> Slot | None:
        """The slot of a call with these arguments (after its first call), or None."""
        return self.slots.get(call_key(args, kwargs))


def qualifying(lookup: Any, objective: Any) -> bool:
    """Whether a lookup's cached winner is tiered under the decorator's ``objective``: it compiles
    slow enough against the default, and serving the default while it compiles costs less at
    ``expected_calls`` than compiling it up front (`autotune.select._tiered.entry_pays`, on the
    entry's stored figures)."""
    if lookup.source != "cache" or lookup.entry is None:
        return False
    from autotune.select._tiered import entry_pays

    return entry_pays(lookup.entry, objective)
