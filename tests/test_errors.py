"""autotune/_errors.py: the one way an exception is quoted in a reason or a message."""

from __future__ import annotations

from autotune._errors import MAX_ERROR_TEXT, error_text


def test_an_error_is_quoted_as_its_type_and_first_line():
    assert error_text(ValueError("bad shape\n  more lines\n")) == "ValueError: bad shape"
    assert error_text(ValueError("\n\n  second\nthird")) == "ValueError: second"
    assert error_text(KeyError()) == "KeyError"
    assert error_text(ValueError("a\nb"), first_line=False) == "ValueError: a\nb"
    assert error_text(ValueError("a\nb"), with_type=False) == "a"
    assert error_text(RuntimeError(), with_type=False) == "RuntimeError"


def test_one_cap_for_every_quoted_error():
    huge = RuntimeError("x" * 100_000)
    assert len(error_text(huge)) == MAX_ERROR_TEXT == len(error_text(huge, first_line=False))
    assert len(error_text(huge, limit=50)) == 50
