"""Waiting in tests: poll a condition until it holds or a deadline passes, never sleep a guess.

A fixed ``time.sleep`` before an assertion is too short on a loaded machine and too long on an idle
one; :func:`wait_until` returns as soon as the condition holds, and its timeout is only the point
at which the test gives up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.02) -> T:
    """Call ``predicate`` until it returns something true, and return that; after ``timeout``
    seconds return its last (false) value, for the caller to assert on. Exceptions propagate, so
    a predicate may assert that what it waits on is still alive.

    Example::

        >>> wait_until(lambda: 42)
        42
        >>> wait_until(lambda: [], timeout=0.05)
        []
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
