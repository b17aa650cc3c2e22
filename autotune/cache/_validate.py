"""Validation primitives shared by cache entries and pending records, and a guarded JSON parser.

Everything the cache stores is JSON; whatever reads it (a database row, an export file) goes
through `loads` and these checks, so a hostile or damaged value becomes one `FieldError`
naming the field, never a traceback: huge integers, non-finite numbers, control characters,
over-long text and deeply nested JSON are refused.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from autotune._errors import CacheImportError
from autotune.program._config import canonical_json

MAX_TEXT = 4096
"""Longest accepted key, site id, study name or other text field, in characters."""
MAX_JSON_DEPTH = 32
"""Deepest nesting accepted in a free-form JSON object (pending records)."""
MAX_JSON_CHARS = 1 << 20
"""Largest accepted free-form JSON object, in characters of its canonical JSON."""
MAX_INT_DIGITS = 100
"""Longest integer literal `loads` accepts: no cache field needs more."""

_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
DEVICE_FIELDS = ("platform", "device_kind", "device_count", "jax", "jaxlib")
OBJECTIVE_FIELDS = ("expected_calls", "compile_weight", "runtime_weight")


class FieldError(ValueError):
    """One field is invalid (internal; callers turn it into a `CacheError`).

    Arguments:
        field: dotted path of the bad field, e.g. ``"config.outer.unroll"``.
        problem: what is wrong, as a sentence fragment.
    """

    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field!r} {problem}")
        self.field = field
        self.problem = problem


def checked(parse: Any, d: Any, noun: str) -> Any:
    """``parse(d)``, its `FieldError` raised as a `CacheImportError` naming the function key
    (what ``from_dict`` of an entry or a record raises)."""
    try:
        return parse(d)
    except FieldError as e:
        name = d.get("function_key") if isinstance(d, Mapping) else None
        who = f" for function {name[:100]!r}" if isinstance(name, str) else ""
        raise CacheImportError(f"The {noun}{who} is invalid: {e}. Fix or remove this {noun.split()[-1]}.") from None


class Record:
    """What a cache entry and a pending record share as JSON data: the export form, the device
    key, and ``from_dict`` through the class's own ``parse`` (a `FieldError` raised as a
    `CacheImportError` naming the function key)."""

    NOUN = "record"
    """The record's name in messages (``"cache entry"``, ``"pending record"``)."""

    @property
    def device_key(self) -> str:
        """Deterministic, readable key of ``device``, e.g. ``"cpu|cpu|1|jax=0.10.2|jaxlib=0.10.2"``."""
        from autotune.program._keys import device_key  # deferred: _keys imports JAX

        return device_key(self.device)  # type: ignore[attr-defined]

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-able dict (its export format)."""
        return json.loads(json.dumps(dataclasses.asdict(self), allow_nan=False))  # type: ignore[call-overload]

    @classmethod
    def parse(cls, d: Any) -> Any:
        """Validate a dict and build the record; `FieldError` on the first bad field."""
        raise NotImplementedError

    @classmethod
    def from_dict(cls, d: Any) -> Any:
        """Build and validate a record from `to_dict` output.

        Raises:
            CacheImportError: naming the record's function key and the invalid field.
        """
        return checked(cls.parse, d, cls.NOUN)


def fields_of(d: Any, required: tuple[str, ...], optional: tuple[str, ...], noun: str) -> Mapping[str, Any]:
    """``d`` as a record's fields: a JSON object with every ``required`` field and no field
    outside ``required`` and ``optional`` (a `FieldError` naming the first that is not)."""
    if not isinstance(d, Mapping):
        raise FieldError(f"<{noun.split()[-1]}>", f"must be a JSON object, got {type(d).__name__}")
    unknown = sorted((k for k in d if k not in required + optional), key=str)
    if unknown:
        raise FieldError(str(unknown[0])[:100], f"is not a {noun} field; valid fields are {list(required + optional)}")
    for name in required:
        if name not in d:
            raise FieldError(name, "is missing")
    return d


def utc_now() -> str:
    """Return the current time as ISO-8601 text in UTC, e.g. ``2025-01-31T12:00:00.000000+00:00``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(
            f"it holds an integer with {len(digits.lstrip('-'))} digits (at most {MAX_INT_DIGITS} are accepted)"
        )
    return int(digits)


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses huge integer literals and reports deep nesting as a `ValueError`.

    Raises:
        ValueError: not JSON (`json.JSONDecodeError`), an integer with more than
            `MAX_INT_DIGITS` digits, or nesting deeper than Python's recursion limit.
    """
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise ValueError("it is nested too deeply (deeper than Python's recursion limit)") from None


def dumps(value: Any) -> str:
    """JSON text for storage: :func:`autotune.program._config.canonical_json` (sorted keys, no NaN/Infinity)."""
    return canonical_json(value)


def text(name: str, value: Any, *, allow_empty: bool = False, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise FieldError(name, f"must be a string, got {type(value).__name__}")
    if not value and not allow_empty:
        raise FieldError(name, "must not be empty")
    if len(value) > limit:
        raise FieldError(name, f"is {len(value)} characters long; the limit is {limit}")
    bad = _CONTROL_RE.search(value)
    if bad is not None:
        raise FieldError(name, f"contains the control character {bad.group()!r}; use printable text")
    return value


def number(name: str, value: Any, *, minimum: float | None = None) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FieldError(name, f"must be a number, got {type(value).__name__} {short(value)}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int beyond float range
        raise FieldError(name, "is a number too large to be a float") from None
    if not finite:
        raise FieldError(name, f"must be a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise FieldError(name, f"must be >= {minimum}, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise FieldError(name, f"must be true or false, got {short(value)}")
    return value


def obj(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise FieldError(name, f"must be a JSON object, got {type(value).__name__}")
    for k in value:
        text(f"{name} key", k)
    return value


def scalar(name: str, value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return text(name, value, allow_empty=True)
    return number(name, value)


def numbers(name: str, value: Any, *, allow_none: bool = False) -> dict[str, Any]:
    out = {}
    for k, v in obj(name, value).items():
        out[k] = None if (v is None and allow_none) else number(f"{name}.{k}", v)
    return out


def json_object(name: str, value: Any, *, max_chars: int = MAX_JSON_CHARS) -> dict[str, Any]:
    """A free-form JSON object: text keys, printable strings, finite numbers, nesting at most
    `MAX_JSON_DEPTH` deep and at most `max_chars` characters as JSON. Returns a plain copy."""
    out = _json_value(name, obj(name, value), 1)
    size = len(canonical_json(out))
    if size > max_chars:
        raise FieldError(name, f"is {size} characters of JSON; the limit is {max_chars}")
    return out


def _json_value(name: str, value: Any, depth: int) -> Any:
    if depth > MAX_JSON_DEPTH:
        raise FieldError(name, f"is nested more than {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, Mapping):
        return {text(f"{name} key", k): _json_value(f"{name}.{k}", v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(f"{name}[{i}]", v, depth + 1) for i, v in enumerate(value)]
    if isinstance(value, str):
        return text(name, value, allow_empty=True, limit=MAX_JSON_CHARS)
    return scalar(name, value)


def device(value: Any, name: str = "device") -> dict[str, Any]:
    dev = {k: scalar(f"{name}.{k}", v) for k, v in obj(name, value).items()}
    for k in DEVICE_FIELDS:
        if k not in dev:
            raise FieldError(f"{name}.{k}", "is missing")
    for k in ("platform", "device_kind", "jax", "jaxlib"):
        text(f"{name}.{k}", dev[k])
    count = dev["device_count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FieldError(f"{name}.device_count", f"must be a positive integer, got {short(count)}")
    return dev


def objective(value: Any, name: str = "objective") -> dict[str, Any]:
    """The figures (numbers >= 0), ``processes`` (a whole number >= 1, left out when 1),
    ``compilation_cache`` and ``tier_up`` (true or false) where recorded (`Objective.to_dict`)."""
    given = dict(obj(name, value))
    cache = given.pop("compilation_cache", None)
    tier = given.pop("tier_up", None)
    p = given.pop("processes", 1)
    o = {k: number(f"{name}.{k}", v, minimum=0) for k, v in given.items()}
    for k in OBJECTIVE_FIELDS:
        if k not in o:
            raise FieldError(f"{name}.{k}", "is missing")
    if number(f"{name}.processes", p, minimum=1) != int(p):
        raise FieldError(f"{name}.processes", f"must be a whole number of processes, got {p!r}")
    o.update({"processes": int(p)} if p != 1 else {})
    o.update({} if cache is None else {"compilation_cache": flag(f"{name}.compilation_cache", cache)})
    return o if tier is None else {**o, "tier_up": flag(f"{name}.tier_up", tier)}


def timestamp(value: Any, name: str = "created_at") -> str:
    t = text(name, value)
    try:
        datetime.fromisoformat(t)
    except ValueError:
        raise FieldError(name, f"must be ISO-8601 text like {utc_now()!r}, got {t!r}") from None
    return t


def short(value: Any) -> str:
    """A value for a message, cut to 80 characters (a hostile value can be huge)."""
    try:
        r = repr(value)
    except (ValueError, RecursionError):  # e.g. an int too long for repr
        return f"<{type(value).__name__}>"
    return r if len(r) <= 80 else r[:77] + "..."
