"""Export the cache to a JSON file, and read such a file back with full validation.

The file format::

    {"format": "jax-autotune-cache", "schema_version": 1, "entries": [CacheEntry.to_dict(), ...]}

`read_export` validates every entry before returning any, so an import writes
either all entries or none.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import CacheError, CacheImportError
from ._entry import CacheEntry, EntryError, parse_entry
from ._models import SCHEMA_VERSION

FORMAT = "jax-autotune-cache"


def write_export(path: str | os.PathLike, entries: Sequence[CacheEntry]) -> int:
    """Write `entries` as an export file, atomically (temp file in the same directory, then rename).

    Arguments:
        path: the JSON file to write; it is replaced if it exists.
        entries: the entries to export.

    Returns:
        The number of entries written.

    Raises:
        CacheError: the file could not be written.
    """
    path = os.path.abspath(os.fspath(path))
    doc = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "entries": [e.to_dict() for e in entries]}
    text = json.dumps(doc, indent=2, sort_keys=True, allow_nan=False) + "\n"
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".autotune-export-", suffix=".tmp", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise CacheError(f"Could not write the cache export file {path}: {e}. Make sure its "
                         "directory exists and is writable, or choose another path.") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return len(entries)


def read_export(path: str | os.PathLike) -> list[CacheEntry]:
    """Read and validate an export file.

    Arguments:
        path: a file written by `write_export` (``Cache.export_json``).

    Returns:
        Every entry, validated and normalised.

    Raises:
        CacheImportError: the file is missing, not JSON, not an export, or one entry is
            invalid (the message names the entry's index, function key and field).
    """
    path = os.fspath(path)
    nothing = "Nothing was imported."
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise CacheImportError(f"The cache export file {path} does not exist; check the path. {nothing}") from None
    except json.JSONDecodeError as e:
        raise CacheImportError(f"The cache export file {path} is not valid JSON ({e}); export it again "
                               f"with `autotune export`. {nothing}") from None
    except (OSError, UnicodeDecodeError, RecursionError) as e:
        raise CacheImportError(f"Could not read the cache export file {path}: {e}. {nothing}") from None
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise CacheImportError(
            f"The file {path} is not a jax-autotune cache export: its top level must be an object with "
            f'"format": "{FORMAT}". Export it with `autotune export` / Cache.export_json. {nothing}')
    version = doc.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise CacheImportError(
            f"The cache export file {path} has schema_version {version!r}, but this jax-autotune reads "
            f"schema_version {SCHEMA_VERSION}; export it again with a matching jax-autotune. {nothing}")
    items = doc.get("entries")
    if not isinstance(items, list):
        raise CacheImportError(f'The cache export file {path} has no "entries" list. {nothing}')
    return [_parse_item(path, i, item) for i, item in enumerate(items)]


def _parse_item(path: str, index: int, item: Any) -> CacheEntry:
    try:
        return parse_entry(item)
    except EntryError as e:
        name = item.get("function_key") if isinstance(item, Mapping) else None
        if isinstance(name, str) and len(name) > 100:
            name = name[:100] + "..."
        who = f" (function_key {name!r})" if isinstance(name, str) else ""
        raise CacheImportError(
            f"Entry {index}{who} of the cache export file {path} is invalid: {e}. Fix or remove "
            "that entry and import again. Nothing was imported.") from None
