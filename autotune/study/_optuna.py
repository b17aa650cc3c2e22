"""The study's storage: the only module of autotune that imports Optuna.

A study is an Optuna study; every trial keeps autotune's facts as user attributes
(:data:`autotune.study._trials.TRIAL_ATTRS`), so any Optuna tool (optuna-dashboard) can read it and a study can be
re-scored for another call count without measuring again. Trials are told COMPLETE only
for real measurements (outcomes ``complete`` and ``shared``), PRUNED for ``pruned``, FAIL
otherwise.

Trials are *leased*: the process measuring a trial records who it is (host, pid, process
start time) and renews ``lease_until`` while it works. A RUNNING trial whose process is
gone (on this host: the pid no longer runs that process; elsewhere: the lease ran out) is
closed as ``abandoned``, so a study killed by SIGKILL, a dropped ssh session or a dead
box never blocks its config: a resumed or shared study measures it again.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import optuna

from autotune._errors import MAX_ERROR_TEXT, StudyError
from autotune.measuring._runner import Outcome
from autotune.program._config import Config
from autotune.study import _locks
from autotune.study._locks import creation_lock, owner_gone, owner_identity
from autotune.study._trials import TRIAL_ATTRS as TRIAL_ATTRS  # noqa: F401 (the attributes this storage writes)
from autotune.study._trials import TrialView as TrialView
from autotune.study._trials import view

LEASE_S = float(os.environ.get("AUTOTUNE_LEASE_S", "60"))
"""How long a trial's lease lasts without renewal; renewed every ``LEASE_S / 6`` seconds."""

_STATE = {Outcome.COMPLETE: "COMPLETE", Outcome.SHARED: "COMPLETE", Outcome.PRUNED: "PRUNED"}

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def _storage_error(url: str, exc: BaseException) -> StudyError:
    from autotune._paths import redact

    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, ImportError) or "no module named" in text.lower():
        return StudyError(
            f"The study storage {redact(url)} needs a database driver that is not installed ({text}); "
            "for PostgreSQL run `pip install 'jax-autotune[postgres]'`."
        )
    return StudyError(
        f"Could not open the study storage {redact(url)}: {text}. Check that the path or server is "
        "reachable and writable (and the disk not full), or pass another --storage."
    )


def storage(url: str) -> optuna.storages.BaseStorage:
    """An Optuna RDB storage for ``url``, created safely when several processes start at once."""
    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    last = None
    for attempt in range(8):
        try:
            with creation_lock(url):
                return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except Exception as exc:  # a PostgreSQL race on CREATE TYPE/TABLE, or a real failure
            last = exc
            text = str(exc).lower()
            if not any(w in text for w in ("already exists", "unique constraint", "duplicate key", "locked")):
                raise _storage_error(url, exc) from None
            time.sleep(0.05 * 2**attempt)
    raise _storage_error(url, last)


class Study:
    """One autotune study in an Optuna storage.

    Arguments:
        name, url: the study's name and storage URL.
        directions: 1 (weighted cost) or 2 (compile_cost_s, run_cost_s) objectives.
        rdb: the storage of ``url`` where it is open already (:func:`storage`), else None.
    """

    def __init__(self, name: str, url: str, directions: int, rdb: optuna.storages.BaseStorage | None = None):
        self.name, self.url = name, url
        self._rdb = st = storage(url) if rdb is None else rdb
        for attempt in range(6):
            try:
                self._study = optuna.create_study(
                    study_name=name,
                    storage=st,
                    directions=["minimize"] * directions,
                    sampler=optuna.samplers.RandomSampler(),
                    load_if_exists=True,
                )
                break
            except Exception as exc:
                if attempt == 5 or not any(w in str(exc).lower() for w in ("already exists", "unique", "duplicate")):
                    raise _storage_error(url, exc) from None
                time.sleep(0.05 * 2**attempt)
        if len(self._study.directions) != directions:
            from autotune._paths import redact

            raise StudyError(
                f"Study {name!r} in {redact(url)} has {len(self._study.directions)} objective(s), but this search "
                f"needs {directions}; pass another study_name (the default names differ)."
            )
        self.directions = directions
        self._lease_lock = threading.Lock()
        self._leased: dict[int, int] = {}  # trial_id -> number, while this process measures them
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    # -- study attributes ---------------------------------------------------------------
    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._study.user_attrs)

    def set_attrs(self, **attrs: Any) -> None:
        for k, v in attrs.items():
            self._study.set_user_attr(k, v)

    # -- trials -------------------------------------------------------------------------
    def trials(self, space=None) -> list[TrialView]:
        return [view(t, space) for t in self._study.get_trials(deepcopy=False)]

    def frozen_trials(self) -> list[optuna.trial.FrozenTrial]:
        return self._study.get_trials(deepcopy=False)

    @contextlib.contextmanager
    def proposal_lock(self) -> Iterator[None]:
        """Held while this process reads the trials, picks a config and opens its trial, so two
        workers of one study never draw the same config at once (PostgreSQL: an advisory lock;
        SQLite: a lock file beside the database). It waits at most ``_locks.PROPOSAL_WAIT_S``
        (10 s: a stopped process may hold it), then goes on without it, and :meth:`owner_of`
        still keeps a config from being measured twice."""
        with _locks.proposal_lock(self._rdb, self.url, self.name):
            yield

    def open(self, config: Config, space, device_key: str) -> tuple[Any, Config]:
        """A RUNNING trial for ``config``, its params and labels written in the one storage call
        that creates it (never through Optuna's queue, which hands a trial the oldest queued
        config, perhaps another process's). Returns the trial and its config."""
        params, choices = space.to_params(config), space.param_choices()
        template = optuna.trial.FrozenTrial(
            number=-1,
            state=optuna.trial.TrialState.RUNNING,
            value=None,
            datetime_start=datetime.datetime.now(),
            datetime_complete=None,
            params=params,
            distributions={k: optuna.distributions.CategoricalDistribution(choices[k]) for k in params},
            user_attrs={
                "config": config.to_json(),
                "device": device_key,
                "owner": owner_identity(),
                "lease_until": time.time() + LEASE_S,
            },
            system_attrs={},
            intermediate_values={},
            trial_id=-1,
        )
        trial_id = self._study._storage.create_new_trial(self._study._study_id, template_trial=template)
        return self._lease(optuna.Trial(self._study, trial_id), space)

    def pop_queued(self, space, device_key: str) -> tuple[Any, Config]:
        """The oldest queued trial (``study.enqueue_trial``, by a user or an Optuna tool), taken
        as Optuna's ``ask`` takes it; returns the trial and the config it holds."""
        trial = self._study.ask()
        trial.set_user_attr("device", device_key)
        trial.set_user_attr("owner", owner_identity())
        trial.set_user_attr("lease_until", time.time() + LEASE_S)
        fixed = self._study._storage.get_trial(trial._trial_id).system_attrs.get("fixed_params", {})
        trial, got = self._lease(trial, space.queued(fixed))
        trial.set_user_attr("config", got.to_json())
        return trial, got

    def _lease(self, trial: Any, space) -> tuple[Any, Config]:
        got = space.suggest(trial)  # the params it holds
        with self._lease_lock:
            self._leased[trial._trial_id] = trial.number
        self._ensure_renewer()
        return trial, got

    def drain_waiting(self, space, device_key: str) -> int:
        """Close the trials still queued when a search ends, as ``duplicate`` (not measurements):
        configs enqueued through Optuna that the budget left no room for, or left by an older
        autotune whose workers enqueued and asked in a race. A finished study holds no trial
        that looks queued."""
        waiting = self._study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        for _ in waiting:
            trial = self._study.ask()
            trial.set_user_attr("config", space.suggest(trial).to_json())
            trial.set_user_attr("device", device_key)
            self.finish(
                trial,
                Outcome.DUPLICATE,
                reason="left queued when the search ended (enqueued through Optuna "
                "beyond the trial budget, or by an older version's enqueue "
                "race); the search proposes its configs itself",
            )
        return len(waiting)

    def finish(
        self, trial: Any, outcome: Outcome, *, value: Any = None, reason: str | None = None, **attrs: Any
    ) -> None:
        """Close a trial with its outcome (and value for a counted measurement)."""
        with self._lease_lock:
            self._leased.pop(trial._trial_id, None)
        trial.set_user_attr("outcome", outcome.value)
        if reason is not None:
            trial.set_user_attr("reason", reason[:MAX_ERROR_TEXT])
        for k, v in attrs.items():
            if v is not None:
                trial.set_user_attr(k, v)
        if SETS_CONSTRAINTS and attrs.get("memory_over_bytes") is not None:  # under a memory budget
            trial.set_constraint("memory", float(attrs["memory_over_bytes"]))
        state = getattr(optuna.trial.TrialState, _STATE.get(outcome, "FAIL"))
        if state == optuna.trial.TrialState.COMPLETE:
            self._study.tell(trial, value)
        else:
            self._study.tell(trial, state=state)

    def owner_of(self, config_json: str, number: int, space) -> int | None:
        """The lower-numbered trial that holds the same config, or None. A config is measured by
        its lowest-numbered trial, so two workers that drew it at once never both measure it
        (each sees the other; only the higher-numbered one yields)."""
        for v in self.trials(space):
            if v.number < number and v.config_json == config_json and v.takes_config:
                return v.number
        return None

    def reclaim_abandoned(self) -> list[int]:
        """Close RUNNING trials whose process is gone as ``abandoned``; their numbers."""
        now, out = time.time(), []
        with self._lease_lock:
            mine = set(self._leased)
        for t in self._study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            if t._trial_id in mine:
                continue
            owner, lease = t.user_attrs.get("owner"), t.user_attrs.get("lease_until")
            started = t.datetime_start.timestamp() if t.datetime_start else now
            if owner and owner_gone(owner):
                why = f"the process measuring it (pid {owner.get('pid')} on {owner.get('host')}) is gone"
            elif (lease if lease is not None else started + LEASE_S) < now - LEASE_S / 6:
                why = "its process stopped renewing its lease (killed, or its machine is gone)"
            else:
                continue
            try:
                self._study._storage.set_trial_user_attr(t._trial_id, "outcome", Outcome.ABANDONED.value)
                self._study._storage.set_trial_user_attr(
                    t._trial_id, "reason", f"abandoned: {why}; the config is free to be measured again"
                )
                self._study.tell(t.number, state=optuna.trial.TrialState.FAIL)
                out.append(t.number)
            except Exception:  # another process closed it first
                continue
        return out

    def _ensure_renewer(self) -> None:
        if self._renewer is not None and self._renewer.is_alive():
            return
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, name="autotune-lease", daemon=True)
        self._renewer.start()

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_S / 6):
            with self._lease_lock:
                leased = list(self._leased)
            for trial_id in leased:
                with contextlib.suppress(Exception):  # a transient storage error: the next renewal retries
                    self._study._storage.set_trial_user_attr(trial_id, "lease_until", time.time() + LEASE_S)

    def close(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)

    # -- samplers -----------------------------------------------------------------------
    def sample(self, sampler: optuna.samplers.BaseSampler, space, tries: int) -> list[Config]:
        """Up to ``tries`` configs drawn by ``sampler`` from the study's trials so far, without
        creating any trial in the study (an in-memory copy is asked instead), so a draw of an
        already measured config costs nothing and the sampler's model is kept."""
        shadow = optuna.create_study(directions=["minimize"] * self.directions, sampler=sampler)
        done = [t for t in self._study.get_trials(deepcopy=True) if t.state.is_finished() and t.distributions]
        for t in done:  # a trial the sampler can learn from must carry its own values
            if t.state == optuna.trial.TrialState.COMPLETE and not t.values:
                continue
            with contextlib.suppress(Exception):
                shadow.add_trial(t)
        out = []
        for _ in range(tries):
            trial = shadow.ask()
            out.append(space.suggest(trial))
            shadow.tell(trial, state=optuna.trial.TrialState.FAIL)
        return out


SETS_CONSTRAINTS = hasattr(optuna.trial.Trial, "set_constraint")
"""Whether a trial carries its own constraints (Optuna 5), which its samplers read."""


def startup_trials(budget: int) -> int:
    """How many trials TPE draws at random before its model draws (its ``n_startup_trials``)."""
    return max(3, min(10, budget // 3))


def learned_from(study: Study) -> int:
    """The trials of ``study`` TPE counts toward its random start (complete or pruned)."""
    counted = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return sum(1 for t in study.frozen_trials() if t.state in counted)


def make_sampler(name: str, seed: int | None, budget: int, constrained: bool = False) -> optuna.samplers.BaseSampler:
    """The Optuna sampler behind ``sampler="tpe" | "nsga2" | "random"``; ``constrained`` (a memory
    budget): TPE and NSGA-II learn which configs are over it, from the constraint each trial sets
    (:meth:`Study.finish`, Optuna 5) or, before Optuna 5, from :func:`memory_constraint`."""
    extra = {"constraints_func": memory_constraint} if constrained and not SETS_CONSTRAINTS else {}
    with warnings.catch_warnings():  # `group` and `constraints_func` are "experimental" in Optuna
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(
                seed=seed, multivariate=True, group=True, n_startup_trials=startup_trials(budget), **extra
            )
        if name == "nsga2":  # small generations, so that a short budget still evolves
            return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(50, budget // 3)), **extra)
    return optuna.samplers.RandomSampler(seed=seed)


def memory_constraint(trial: optuna.trial.FrozenTrial) -> tuple[float]:
    """Optuna's constraint of a trial (feasible at <= 0): how many bytes over the memory budget its
    config is (``memory_over_bytes``, `autotune.study._trials.memory_attrs`); a trial that measured
    nothing counts as feasible (its state already says it failed)."""
    return (float(trial.user_attrs.get("memory_over_bytes", -1)),)


def load(name: str, url: str) -> Study:
    """An existing study (raises StudyError naming the studies that exist)."""
    from autotune._paths import redact

    try:
        optuna.load_study(study_name=name, storage=storage(url))
    except KeyError:
        names = optuna.study.get_all_study_names(storage=storage(url))
        raise StudyError(
            f"No study {name!r} in {redact(url)}; it has {len(names)} "
            f"stud{'y' if len(names) == 1 else 'ies'}: {names[:10]}."
        ) from None
    return Study(name, url, len(optuna.load_study(study_name=name, storage=storage(url)).directions))


def summaries(url: str) -> list[dict[str, Any]]:
    """Name and user attributes of every study in a storage (refusing to create a missing SQLite file)."""
    from autotune._paths import redact, storage_file

    path = storage_file(url)
    if path is not None and not os.path.exists(path):
        raise StudyError(
            f"There is no study storage at {redact(url)}: run `autotune tune FILE` first, or pass "
            "--storage (or --cache) to point at the one it used."
        )
    try:
        found = optuna.get_all_study_summaries(storage=storage(url), include_best_trial=False)
    except StudyError:
        raise
    except Exception as exc:
        raise _storage_error(url, exc) from None
    return [{"name": s.study_name, "attrs": dict(s.user_attrs), "n_trials": s.n_trials} for s in found]
