"""Checks of the plain arguments of run_all / run / load_scenario / campaign, as the CLI checks its
options: each bad value is a BadInputError naming the argument and what was expected."""

import math
import os

from ._errors import BadInputError


def _bad(name, expected, got):
    raise BadInputError("%s: expected %s, got %r" % (name, expected, got), file=name, key=name, expected=expected)


def path(name, value):
    """A str or os.PathLike path without NUL bytes or unpaired surrogates, as a str."""
    if not isinstance(value, (str, os.PathLike)) or not isinstance(os.fspath(value), str):
        _bad(name, "a path (str or os.PathLike)", value)
    text = text_ok(name, os.fspath(value))
    if not text:
        _bad(name, "a non-empty path", value)
    return text


def text_ok(name, text):
    """A str that can be handed on as UTF-8: no NUL byte, no unpaired surrogate."""
    if "\x00" in text:
        _bad(name, "text without NUL bytes", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        _bad(name, "text that is valid Unicode (no unpaired surrogates)", text)
    return text


def integer(name, value, lo, hi, none_ok=False):
    """An int (or integral number) in [lo, hi]; None when none_ok."""
    if value is None and none_ok:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not hasattr(value, "__index__") or not lo <= value.__index__() <= hi:
        _bad(name, "an integer in [%d, %d]" % (lo, hi), value)
    return value.__index__()


def seconds(name, value):
    """A timeout in whole seconds (0: never); a fraction is rounded up, so it never means 'never'."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and not math.isfinite(value):
        _bad(name, "a number of seconds >= 0 (0: never)", value)
    if value < 0 or value > 2**31 - 1:
        _bad(name, "a number of seconds in [0, 2147483647] (0: never)", value)
    return int(math.ceil(value))
