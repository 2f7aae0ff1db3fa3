"""Detection layouts ``convert images`` must not pack as classes: a YOLO or Pascal VOC folder's subfolders are
not classes (packed, ``images/`` and ``labels/`` became a 2-class set with exit 0). Recognised by the folders
their tools require and by what the label folder holds (YOLO's .txt, VOC's .xml): a classification set whose
classes happen to be named ``images``/``labels`` holds images in both, and is packed as the class folders it is.
Refused in one line naming the layout and the command that converts it."""

from __future__ import annotations

import os
from pathlib import Path

from dataio.formats.errors import UsageError

# (image folder, label folder, the label files' suffix, what it is, the command that packs it)
LAYOUTS = (("images", "labels", ".txt", "a YOLO detection folder (images/ and labels/)",
            "dataio convert yolo SRC OUT"),
           ("JPEGImages", "Annotations", ".xml", "a Pascal VOC folder (JPEGImages/ and Annotations/)",
            "dataio convert voc SRC OUT --split trainval"))


def detection_layout(src: Path) -> tuple[str, str] | None:
    """(what the layout is, the command that converts it) when ``src`` is a detection folder; else None."""
    for images, labels, suffix, what, command in LAYOUTS:
        if (Path(src) / images).is_dir() and _holds(Path(src) / labels, suffix):
            return what, command
    return None


def _holds(folder: Path, suffix: str) -> bool:
    """Whether any file under ``folder`` ends in ``suffix`` (stops at the first; False when it is no folder)."""
    for _, _, files in os.walk(folder):
        if any(name.lower().endswith(suffix) for name in files):
            return True
    return False


def refuse_detection_layout(src: Path) -> None:
    """UsageError in one line when ``src`` is a detection layout given as a folder of class subfolders."""
    found = detection_layout(src)
    if found is not None:
        raise UsageError(f"{src}: {found[0]}, not class folders: its subfolders are not classes; "
                         f"convert it with {found[1]}")
