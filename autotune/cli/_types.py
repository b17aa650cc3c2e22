"""The flags whose text an option's one reader parses (a duration, a memory budget), as argparse types."""

from __future__ import annotations

import argparse
from typing import Any


def _read_by(module: str, reader: str, flag: str, **keywords: Any):
    """An argparse type reading a flag's text with ``module.reader`` (the option's one reader,
    imported when used): its error, one line naming the flag."""

    def read(text: str) -> Any:
        from importlib import import_module

        from autotune._errors import AutotuneError

        try:
            return getattr(import_module(module), reader)(text, **keywords)
        except AutotuneError as e:
            raise argparse.ArgumentTypeError(str(e).removeprefix(f"{flag} ").rstrip(".")) from None

    read.__name__ = reader
    return read


# --time-budget: 90s, 30m, 1.5h or seconds; --max-memory: 12GiB, 512MB, bytes or a fraction of the device's
duration = _read_by("autotune.record._budget", "parse_duration", "--time-budget")
memory_size = _read_by("autotune.select._budget", "parse", "--max-memory", what="--max-memory")
