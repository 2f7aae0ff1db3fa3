"""A user's value as it appears in an error message: a short ``repr``, in bounded time and memory.

``f"got {value!r:.80}"`` cuts the text but builds all of it first: a value from a
YAML file with aliases can stand for billions of items (nine lists of nine
references to the list before), whose full ``repr`` never ends. ``reprlib``
looks at a few items of each container, a few levels deep, and cuts long
strings and numbers, so what it costs does not depend on the value.
"""

from __future__ import annotations

import reprlib

class _Short(reprlib.Repr):
    """``reprlib`` with a few items of a few levels, and huge integers by their size (``repr`` of one past 4,300
    digits raises, and is quadratic below)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 2
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 3
        self.maxstring = self.maxother = 60
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<an integer of about {int(x.bit_length() * 0.30103)} digits>"
        return super().repr_int(x, level)


_SHORT = _Short()


def shown(value: object) -> str:
    """``repr(value)``, at most ~200 characters, computed from a bounded part of it."""
    return _SHORT.repr(value)
