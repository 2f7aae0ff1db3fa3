"""Class names from a ``--classes FILE``: one name per line, line i is label i."""

from __future__ import annotations

from pathlib import Path

from dataio.formats.bounded_read import read_at_most
from dataio.formats.errors import UsageError
from dataio.formats.file_gate import FileRefused
from dataio.formats.limits import MAX_CLASSES, MAX_CLASSES_FILE_BYTES


def read_class_names(path: Path) -> tuple[str, ...]:
    """The names in ``path`` (blank lines skipped); UsageError if unreadable, past ``MAX_CLASSES_FILE_BYTES``
    (a FIFO or ``/dev/zero`` is refused as not a regular file, unread), empty or with a name twice."""
    try:
        text = read_at_most(path, MAX_CLASSES_FILE_BYTES).decode()
        names = [line.strip() for line in text.splitlines() if line.strip()]
    except FileRefused as e:  # too large, or not a regular file: the reason says which
        raise UsageError(f"classes file {path}: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"classes file {path}: cannot read ({e})") from None
    if not names or len(set(names)) != len(names):
        raise UsageError(f"classes file {path}: empty, or a name appears twice")
    return tuple(names)


def numbered_classes(labels: list[int]) -> tuple[str, ...]:
    """``"0"`` .. ``"K-1"`` for labels up to K-1, when no names are given.

    Labels at or past ``MAX_CLASSES`` make no names (their rows are rejected as outside the classes), so
    one absurd label cannot build a list of that many names.
    """
    return tuple(str(i) for i in range(max((label for label in labels if label < MAX_CLASSES), default=-1) + 1))


def label_outside(label: int, classes: tuple[str, ...], named: bool) -> str | None:
    """Why ``label`` is no class of ``classes`` (``named``: from a classes file or the source's metadata), or None."""
    if 0 <= label < len(classes):
        return None
    if not named and label >= MAX_CLASSES:
        return f"label {label} is past the {MAX_CLASSES:,} classes a source without class names may have " \
               "(give a classes file for more)"
    source = "the classes file" if named else "the labels seen"
    return f"label {label} is not in 0..{len(classes) - 1} ({source})"
