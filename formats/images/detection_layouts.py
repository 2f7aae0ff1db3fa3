"""Detection layouts ``convert images`` must not pack as classes: a YOLO or Pascal VOC folder's subfolders are
not classes (packed, ``images/`` and ``labels/`` became a 2-class set with exit 0). Recognised by the folders
their tools require, and refused in one line naming the layout and the command that converts it."""

from __future__ import annotations

from pathlib import Path

from dataio.formats.errors import UsageError

# (folders that together mark the layout, what it is, the command that packs it)
LAYOUTS = ((("images", "labels"), "a YOLO detection folder (images/ and labels/)", "dataio convert yolo SRC OUT"),
           (("JPEGImages", "Annotations"), "a Pascal VOC folder (JPEGImages/ and Annotations/)",
            "dataio convert voc SRC OUT --split trainval"))


def detection_layout(src: Path) -> tuple[str, str] | None:
    """(what the layout is, the command that converts it) when ``src`` is a detection folder; else None."""
    for folders, what, command in LAYOUTS:
        if all((Path(src) / folder).is_dir() for folder in folders):
            return what, command
    return None


def refuse_detection_layout(src: Path) -> None:
    """UsageError in one line when ``src`` is a detection layout given as a folder of class subfolders."""
    found = detection_layout(src)
    if found is not None:
        raise UsageError(f"{src}: {found[0]}, not class folders: its subfolders are not classes; "
                         f"convert it with {found[1]}")
