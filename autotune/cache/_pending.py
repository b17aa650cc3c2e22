"""`PendingRecord`: a call signature recorded for tuning later (record and replay).

With recording on, the decorator writes one record at the first call per (function,
program fingerprint, abstract signature, device); ``autotune tune --recorded`` rebuilds
the call from it. A record is plain JSON, validated like a cache entry (`parse_pending`
is its single gate: `Cache.record`, database rows and export files all pass through it).
Argument values, when recorded, live as ``.npy`` files (never pickle) in `Cache.values_dir`;
the record only names them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from autotune.cache import _validate as v
from autotune.cache._validate import MAX_TEXT, FieldError, utc_now

VALUE_FILE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.npy")
"""A value file name: plain (no folders), so a record can never point outside `Cache.values_dir`."""

_REQUIRED = ("function_key", "fingerprint", "signature", "device", "location", "abstract", "objective")
_OPTIONAL = ("options", "replayable", "why_not", "values", "created_at")


@dataclass(frozen=True)
class PendingRecord(v.Record):
    """A recorded call signature, waiting to be tuned.

    Arguments:
        function_key, fingerprint, signature: as in `CacheEntry` (the record's key, with the device).
        device: the device dict it ran on (``platform``, ``device_kind``, ``device_count``, ``jax``, ``jaxlib``).
        location: where the function can be imported from, a JSON object, e.g.
            ``{"module": "app", "qualname": "step", "file": "/abs/app.py"}``.
        abstract: the abstract signature as a JSON object (pytree structure, shapes,
            dtypes, weak types, static arguments).
        objective: ``expected_calls``, ``compile_weight``, ``runtime_weight`` of the decorator.
        options: the decorator's jit options that rebuild the call, a JSON object.
        replayable: whether the call can be rebuilt; when False, ``why_not`` says why.
        why_not: why the call cannot be replayed (required exactly when ``replayable`` is False).
        values: None (shapes only), or ``{"files": [name or None, ...], "bytes": int,
            "note": str or None, ...}``: the ``.npy`` files in `Cache.values_dir` holding the
            argument values, their total size, and a note (e.g. why values were not kept).
        created_at: ISO-8601 UTC time of the recording.
    """

    function_key: str
    fingerprint: str
    signature: str
    device: dict
    location: dict
    abstract: dict
    objective: dict
    options: dict = field(default_factory=dict)
    replayable: bool = True
    why_not: str | None = None
    values: dict | None = None
    created_at: str = field(default_factory=utc_now)
    NOUN = "pending record"

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(function_key, fingerprint, signature, device_key)``: unique in the cache."""
        return (self.function_key, self.fingerprint, self.signature, self.device_key)

    @property
    def value_files(self) -> list[str]:
        """The names of the value files this record refers to (empty without values)."""
        if not self.values:
            return []
        return [f for f in self.values.get("files", []) if f is not None]

    @classmethod
    def parse(cls, d: Any) -> PendingRecord:
        return parse_pending(d)


def parse_pending(d: Any) -> PendingRecord:
    """Validate a dict and build the `PendingRecord`; raise `FieldError` on the first bad field."""
    d = v.fields_of(d, _REQUIRED, _OPTIONAL, "pending record")
    replayable = v.flag("replayable", d.get("replayable", True))
    why_not = d.get("why_not")
    if replayable and why_not is not None:
        raise FieldError("why_not", "must be null for a replayable record (it says why a record cannot be replayed)")
    if not replayable:
        if why_not is None:
            raise FieldError("why_not", "is missing: a record that cannot be replayed must say why")
        v.text("why_not", why_not)
    rec = PendingRecord(
        function_key=v.text("function_key", d["function_key"]),
        fingerprint=v.text("fingerprint", d["fingerprint"]),
        signature=v.text("signature", d["signature"], allow_empty=True),
        device=v.device(d["device"]),
        location=v.json_object("location", d["location"]),
        abstract=v.json_object("abstract", d["abstract"]),
        objective=v.objective(d["objective"]),
        options=v.json_object("options", d.get("options", {})),
        replayable=replayable,
        why_not=why_not,
        values=_values(d.get("values")),
        created_at=v.timestamp(d.get("created_at", utc_now())),
    )
    if len(rec.device_key) > MAX_TEXT:
        raise FieldError("device", f"gives a device key longer than {MAX_TEXT} characters")
    return rec


def _values(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    out = v.json_object("values", value)
    for k in ("files", "bytes"):
        if k not in out:
            raise FieldError(f"values.{k}", "is missing")
    files = out["files"]
    if not isinstance(files, list):
        raise FieldError("values.files", f"must be a list of file names, got {type(files).__name__}")
    for i, name in enumerate(files):
        if name is not None and (not isinstance(name, str) or not VALUE_FILE_RE.fullmatch(name)):
            raise FieldError(
                f"values.files[{i}]",
                f"must be a plain .npy file name (letters, digits, '.', '_', "
                f"'-'; no folders) or null, got {v.short(name)}",
            )
    present = [f for f in files if f is not None]
    if len(set(present)) != len(present):
        raise FieldError("values.files", "names one file twice")
    b = out["bytes"]
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise FieldError("values.bytes", f"must be a non-negative integer, got {v.short(b)}")
    if out.get("note") is not None:
        v.text("values.note", out["note"])
    return out
