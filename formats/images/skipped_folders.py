"""What in a source folder is not packed though ImageFolder would read it: hidden entries and earlier outputs.

torchvision's ``ImageFolder`` makes every folder at the top of the source a
class (``find_classes`` keeps every ``os.scandir`` entry that is a folder, dot
ones included) and lists every file with an image extension below a class,
in hidden folders and dot-files too. A Jupyter ``.ipynb_checkpoints`` holding
images would so become class 0 and shift every other label by one. dataio
never packs hidden folders and files (users almost never mean them as data),
and does not refuse them either; each one that holds images is listed in
``rejected.jsonl`` with how many and what ImageFolder would make of it, so the
difference is said, in one line, at conversion (``--strict`` fails on it).

An output folder inside the source is refused before anything is written: a
second conversion would walk the first one's output as a class. A folder at
the top of the source that holds an earlier dataio output (its manifest,
journal or rank folders) is not a class: it is skipped with one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from dataio.formats.errors import UsageError
from dataio.formats.images.image_names import is_packed_name

# What marks a folder as a dataio output: its manifest, the journal or lock of a conversion under way, the
# merge lock of a conversion across ranks (only these are looked for: no class folder is listed twice).
OUTPUT_MARKERS = ("manifest.json", ".journal", ".dataio.lock", ".merge.lock")


def refuse_output_inside_source(src: Path, out: Path) -> None:
    """UsageError if ``out`` is ``src`` or inside it (links resolved): the next conversion would pack it."""
    source, output = os.path.realpath(src), os.path.realpath(out)
    if output == source or output.startswith(source.rstrip(os.sep) + os.sep):
        raise UsageError(f"output folder {out} is inside the source folder {src}: a later conversion of {src} "
                         "would pack it as a class (and shift every label); choose an output folder outside it")


def images_under(folder: bytes) -> int:
    """Files with ImageFolder's extensions anywhere under ``folder`` (symlinks not followed, so the count ends)."""
    count = 0
    for _, _, names in os.walk(folder, followlinks=False):
        count += sum(map(is_packed_name, names))
    return count


def output_marker(folder: bytes) -> str | None:
    """The file that shows ``folder`` holds a dataio output (``manifest.json``, ...), or None."""
    return next((name for name in OUTPUT_MARKERS if os.path.lexists(os.path.join(folder, name.encode()))), None)


def hidden_class_reason(images: int, position: int, after: int) -> str:
    """Why a hidden folder at the top of the source, holding ``images``, is not packed; ``position``: the class
    index ImageFolder would give it; ``after``: how many of dataio's classes sort after it."""
    shifted = (f"so the labels of the {after} class(es) after it would be one higher there than here" if after
               else "after every class here, so no label here would differ")
    return (f"hidden folder holding {images} image(s): not a class, not packed; torchvision's ImageFolder would "
            f"make it class {position}, {shifted} (move or delete the folder to agree with ImageFolder)")


def hidden_in_class_reason(images: int, class_name: str) -> str:
    """Why a hidden folder inside a class folder, holding ``images``, is not packed."""
    return (f"hidden folder holding {images} image(s): not packed; torchvision's ImageFolder would read them as "
            f"samples of class {class_name!r}")


def hidden_file_reason(class_name: str) -> str:
    """Why a hidden file with an image extension (``.x.jpg``, a macOS ``._x.jpg``) is not packed."""
    return f"hidden file: not packed; torchvision's ImageFolder would read it as a sample of class {class_name!r}"


def output_folder_reason(marker: str) -> str:
    """Why a folder at the top of the source holding a dataio output is not a class."""
    return (f"holds a dataio output ({marker}): not a class, not packed (torchvision's ImageFolder would refuse it "
            "as a class without images); move it out of the source folder")


def stray_image_reason() -> str:
    """Why an image at the top of the source (outside every class folder) is not packed."""
    return "image outside every class folder: not packed (torchvision's ImageFolder does not list it either)"
