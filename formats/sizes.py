"""Parse human byte sizes such as ``256MB`` or ``1.5GiB``."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str | int) -> int:
    """``"256MB"`` -> 256_000_000; an int is returned as is. Raises ValueError."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 256MB, 1GiB, 1000000)")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if value >= 2**63:  # a thousand-digit number is inf as a float: an overflow, not a size
        raise ValueError(f"not a size: {text!r:.40} is past 2**63 bytes")
    return int(value)
