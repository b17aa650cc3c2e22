"""Export the cache to a JSON file, and read such a file back with full validation.

The file format (``schema_version`` 2; files of version 1, entries only, still import)::

    {"format": "jax-autotune-cache", "schema_version": 2,
     "entries": [CacheEntry.to_dict(), ...],
     "pending": [PendingRecord.to_dict(), ...],
     "values": {"<file>.npy": "<base64 of the .npy bytes>", ...}}

`read_export` refuses anything but a regular file, and files over a size cap
(`MAX_IMPORT_BYTES`, 256 MiB, unless the caller passes another), before reading a byte;
it reads at most the cap, so memory stays bounded. It validates every entry, record and
value file before returning any, so an import writes either all of them or none.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune._errors import CacheError, CacheImportError
from autotune._paths import write_private
from autotune.cache._entry import CacheEntry, parse_entry
from autotune.cache._models import SCHEMA_VERSION
from autotune.cache._pending import VALUE_FILE_RE, PendingRecord, parse_pending
from autotune.cache._validate import FieldError, loads

FORMAT = "jax-autotune-cache"
READABLE_VERSIONS = (1, 2)
MAX_IMPORT_BYTES = 256 * 2**20
"""Largest export file `read_export` reads unless told otherwise (``max_bytes=``, CLI ``--max-size``)."""
_CHUNK = 1 << 20
_NOTHING = "Nothing was imported."


@dataclass(frozen=True)
class Bundle:
    """The validated contents of an export file."""

    entries: list[CacheEntry] = field(default_factory=list)
    pending: list[PendingRecord] = field(default_factory=list)
    values: dict[str, bytes] = field(default_factory=dict)


class TransferCount(int):
    """How many entries an export or import moved (an ``int``), with the pending records too.

    Attributes:
        entries: entries written or imported (the int's value).
        pending: pending records written or imported (an import keeps existing records:
            the first recording wins).
        pending_kept: pending records of an import skipped because the cache had them.
    """

    entries: int
    pending: int
    pending_kept: int

    def __new__(cls, entries: int, pending: int = 0, pending_kept: int = 0) -> TransferCount:
        self = super().__new__(cls, entries)
        self.entries, self.pending, self.pending_kept = entries, pending, pending_kept
        return self


def gather(entries: list[CacheEntry], pending: list[PendingRecord], values_dir: str) -> Bundle:
    """What an export holds: the entries, and the pending records with their value files read
    from ``values_dir``. A record whose value files are gone is exported with shapes only, and
    its ``values`` note says so."""
    records, values = [], {}
    for rec in pending:
        try:
            blobs = {n: _read_file(os.path.join(values_dir, n)) for n in rec.value_files}
        except OSError as e:
            note = f"the value files were missing when this cache was exported ({e.strerror}): shapes only"
            rec = dataclasses.replace(rec, values={"files": [], "bytes": 0, "note": note})
            blobs = {}
        values.update(blobs)
        records.append(rec)
    return Bundle(list(entries), records, values)


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_export(path: str | os.PathLike, bundle: Bundle) -> None:
    """Write ``bundle`` as an export file: atomically (temp file in the same directory, then
    rename), mode 0600 (it holds what the cache holds).

    Raises:
        CacheError: the file could not be written.
    """
    path = os.path.abspath(os.fspath(path))
    doc = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "entries": [e.to_dict() for e in bundle.entries],
        "pending": [r.to_dict() for r in bundle.pending],
        "values": {name: base64.b64encode(data).decode("ascii") for name, data in sorted(bundle.values.items())},
    }
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    if not os.path.isdir(os.path.dirname(path)):
        raise CacheError(
            f"Could not write the cache export file {path}: its directory does not exist. "
            "Create it, or choose another path."
        )
    try:
        write_private(path, text.encode("utf-8"))
    except OSError as e:
        raise CacheError(
            f"Could not write the cache export file {path}: {e}. Make sure its "
            "directory exists and is writable, or choose another path."
        ) from None


def read_bounded(path: str | os.PathLike, max_bytes: int = MAX_IMPORT_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes.

    A FIFO, a device (``/dev/zero``), a socket or a directory is refused before anything
    is read (a FIFO is opened non-blocking, so it cannot hang), and so is a file whose
    size is over the cap; a file that grows past the cap while read is refused too.

    Raises:
        CacheImportError: naming the file and what to do.
    """
    path = os.fspath(path)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise CacheImportError(f"max_bytes={max_bytes!r} must be a positive whole number of bytes. {_NOTHING}")
    cap = (
        f"the import limit of {max_bytes} bytes ({max_bytes / 2**20:g} MiB); pass max_bytes= "
        "(CLI: --max-size MIB) to import a larger file"
    )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise CacheImportError(f"The cache export file {path} does not exist; check the path. {_NOTHING}") from None
    except OSError as e:
        raise CacheImportError(f"Could not open the cache export file {path}: {e.strerror or e}. {_NOTHING}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = (
                "a directory"
                if stat.S_ISDIR(st.st_mode)
                else "a FIFO (named pipe)"
                if stat.S_ISFIFO(st.st_mode)
                else "a device"
                if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket"
                if stat.S_ISSOCK(st.st_mode)
                else "not a regular file"
            )
            raise CacheImportError(
                f"{path} is {kind}, not a regular file; import reads only regular files "
                f"written by `autotune export`. {_NOTHING}"
            )
        if st.st_size > max_bytes:
            raise CacheImportError(f"The cache export file {path} is {st.st_size} bytes, more than {cap}. {_NOTHING}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise CacheImportError(f"The cache export file {path} grew past {cap}. {_NOTHING}")
        return b"".join(chunks)
    except OSError as e:
        raise CacheImportError(f"Could not read the cache export file {path}: {e.strerror or e}. {_NOTHING}") from None
    finally:
        os.close(fd)


def read_export(path: str | os.PathLike, max_bytes: int = MAX_IMPORT_BYTES) -> Bundle:
    """Read and validate an export file.

    Arguments:
        path: a file written by `write_export` (``Cache.export_json``).
        max_bytes: refuse files larger than this.

    Returns:
        Every entry, pending record and value file, validated and normalised.

    Raises:
        CacheImportError: the file is unreadable, too large, not JSON, not an export, or one
            item is invalid (the message names the item's index, function key and field).
    """
    path = os.fspath(path)
    raw = read_bounded(path, max_bytes)
    try:
        doc = loads(raw)
    except json.JSONDecodeError as e:
        raise CacheImportError(
            f"The cache export file {path} is not valid JSON ({e}); export it again with `autotune export`. {_NOTHING}"
        ) from None
    except ValueError as e:  # a huge number, deep nesting, bad UTF-8
        raise CacheImportError(
            f"The cache export file {path} cannot be read: {e}; export it again with `autotune export`. {_NOTHING}"
        ) from None
    del raw
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise CacheImportError(
            f"The file {path} is not a jax-autotune cache export: its top level must be an object with "
            f'"format": "{FORMAT}". Export it with `autotune export` / Cache.export_json. {_NOTHING}'
        )
    version = doc.get("schema_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise CacheImportError(
            f"The cache export file {path} has schema_version {str(version)[:40]}, but this jax-autotune reads "
            f"schema_version {' or '.join(map(str, READABLE_VERSIONS))}; export it again with a matching "
            f"jax-autotune. {_NOTHING}"
        )
    items = doc.get("entries")
    if not isinstance(items, list):
        raise CacheImportError(f'The cache export file {path} has no "entries" list. {_NOTHING}')
    entries = [_parse_item(path, "Entry", i, item, parse_entry) for i, item in enumerate(items)]
    records = doc.get("pending", [])
    if not isinstance(records, list):
        raise CacheImportError(f'The cache export file {path} has a "pending" that is not a list. {_NOTHING}')
    pending = [_parse_item(path, "Pending record", i, item, parse_pending) for i, item in enumerate(records)]
    return Bundle(entries, pending, _values(path, doc.get("values", {}), pending))


def _parse_item(path: str, kind: str, index: int, item: Any, parse: Any) -> Any:
    try:
        return parse(item)
    except FieldError as e:
        name = item.get("function_key") if isinstance(item, Mapping) else None
        if isinstance(name, str) and len(name) > 100:
            name = name[:100] + "..."
        who = f" (function_key {name!r})" if isinstance(name, str) else ""
        raise CacheImportError(
            f"{kind} {index}{who} of the cache export file {path} is invalid: {e}. Fix or remove "
            f"that {kind.lower()} and import again. {_NOTHING}"
        ) from None


def _values(path: str, blobs: Any, pending: Sequence[PendingRecord]) -> dict[str, bytes]:
    if not isinstance(blobs, Mapping):
        raise CacheImportError(f'The cache export file {path} has a "values" that is not an object. {_NOTHING}')
    wanted = {name for rec in pending for name in rec.value_files}
    out = {}
    for name, text in blobs.items():
        where = f"The value file {str(name)[:100]!r} in the cache export file {path}"
        if not isinstance(name, str) or not VALUE_FILE_RE.fullmatch(name):
            raise CacheImportError(f"{where} has an invalid name (a plain .npy file name is expected). {_NOTHING}")
        if name not in wanted:
            raise CacheImportError(f"{where} belongs to no pending record; remove it. {_NOTHING}")
        try:
            data = base64.b64decode(text, validate=True)
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except (TypeError, ValueError, binascii.Error, EOFError, OSError) as e:
            raise CacheImportError(f"{where} is not base64 of a .npy array without objects ({e}). {_NOTHING}") from None
        if not isinstance(array, np.ndarray):
            raise CacheImportError(f"{where} holds several arrays (.npz); one .npy array is expected. {_NOTHING}")
        out[name] = data
    missing = sorted(wanted - set(out))
    if missing:
        raise CacheImportError(
            f"The cache export file {path} lacks the value file {missing[0]!r} that a pending "
            f"record names; export it again. {_NOTHING}"
        )
    return out
