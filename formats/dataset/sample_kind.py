"""The kind of sample a shard folder holds, as its manifest declares it, and the one inference for folders
packed before the declaration.

Every converter and ``dataio index`` writes ``sample_kind`` into the manifest (``classification``, ``pairs``,
``detection``, ``tokens``, ``views``); readers look the kind up in one table (``dataio.formats.kinds``) rather
than guessing it from the fields with if-chains. A manifest written before the key existed (the committed
``tests/fixtures/format_1_1``, and ``kind="images"`` folders of every kind packed until December 2026) gets its
kind here, once, from what it stores: its layout and its declared fields.
"""

from __future__ import annotations

from dataio.formats.dataset.sample_fields import FieldSpec
from dataio.formats.kinds import KINDS

# The kinds of sample this dataio reads, as the table of kinds names them; the manifest's ``sample_kind`` is one.
SAMPLE_KINDS = tuple(KINDS)


def inferred_kind(layout: str, declared: str, fields: tuple[FieldSpec, ...]) -> str:
    """The kind of a folder: the manifest's ``declared`` kind, or, for a folder packed before kinds were
    declared (``declared`` empty), the kind its ``layout`` ("images" or "text") and ``fields`` held then.

    The only place a kind is read off fields: boxes declared as a column made a COCO folder (``convert coco``),
    a caption text field without a class an image-text pair folder (``convert images --captions``, ``index``).
    """
    if declared:
        return declared
    if layout == "text":
        return "tokens"
    if any(f.name == "boxes" and f.kind == "boxes" and f.stored == "column" for f in fields):
        return "detection"
    if any(f.name == "caption" and f.kind == "text" for f in fields) and not any(f.kind == "class" for f in fields):
        return "pairs"
    return "classification"
