"""Class names from a ``--classes FILE``: one name per line, line i is label i."""

from __future__ import annotations

from pathlib import Path

from dataio.formats.errors import UsageError


def read_class_names(path: Path) -> tuple[str, ...]:
    """The names in ``path`` (blank lines skipped); UsageError if unreadable, empty or with a name twice."""
    try:
        names = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"classes file {path}: cannot read ({e})") from None
    if not names or len(set(names)) != len(names):
        raise UsageError(f"classes file {path}: empty, or a name appears twice")
    return tuple(names)


def numbered_classes(labels: list[int]) -> tuple[str, ...]:
    """``"0"`` .. ``"K-1"`` for labels up to K-1, when no names are given."""
    return tuple(str(i) for i in range(max(labels, default=-1) + 1))
