"""A sample's fields, declared once in the manifest: each one's name, kind, dtype and where it is stored.

As MosaicML Streaming's MDS columns and Megatron-Energon's sample types do, a
folder says what a sample holds before a byte of it is read: an image member
and a class label, token ids, a caption, boxes. A new kind of sample adds
fields, not a format: a field stored as a column is one more column of the
sample table (readers check the columns they need and the declared ones, a
superset, never an exact schema). Folders packed before fields were declared
(manifests without ``fields``) hold what their kind always held
(``default_fields``), so they open and read as they did.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

KINDS = ("image", "class", "text", "tokens", "boxes", "masks", "json", "array")
STORED = ("member", "column")  # a member per sample in the shards, or a column of the sample table / token rows
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class FieldsError(ValueError):
    """A ``fields`` declaration that is not a list of well-formed, distinct fields."""


@dataclass(frozen=True, kw_only=True)
class FieldSpec:
    """One field of every sample: ``name`` (a batch's key), ``kind``, ``dtype`` (an encoding or numpy dtype),
    ``stored`` (a shard member, or a column)."""

    name: str
    kind: str
    dtype: str
    stored: str = "column"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


LABEL = FieldSpec(name="label", kind="class", dtype="int32")  # the class: a column of classification's tables only
IMAGE_FIELDS = (FieldSpec(name="image", kind="image", dtype="jpeg", stored="member"), LABEL)


def image_field(options: dict[str, Any]) -> FieldSpec:
    """The image member, in the encoding the packer recorded (``image_encoding``: tars adopted by ``dataio index``
    keep theirs), else JPEG (what the converters write)."""
    return FieldSpec(name="image", kind="image", dtype=str(options.get("image_encoding", "jpeg")), stored="member")


def classification_fields(options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields of a classification folder (``convert images``, ``index`` of ``.cls`` tars): the image, its class."""
    return (image_field(options), LABEL)


def text_fields(token_dtype: str) -> tuple[FieldSpec, ...]:
    """The fields of a token shard folder: each document's ids, in the folder's token dtype."""
    return (FieldSpec(name="input_ids", kind="tokens", dtype=token_dtype),)


def declared_text_fields(options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields of a token folder (``convert text``), from the token dtype its manifest records."""
    return text_fields(str(options.get("token_dtype", "uint32")))


def default_fields(kind: str, options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """What a folder of ``kind`` held before fields were declared (images: a JPEG member and a label)."""
    if kind == "images":
        return IMAGE_FIELDS
    if kind == "text":
        return declared_text_fields(options)
    return ()


def parse_fields(raw: Any, where: str) -> tuple[FieldSpec, ...]:
    """The ``fields`` of a manifest, validated; raises FieldsError naming ``where`` and the bad entry."""
    if not isinstance(raw, list):
        raise FieldsError(f"{where}: fields must be a list, got {type(raw).__name__}")
    fields: list[FieldSpec] = []
    for i, entry in enumerate(raw):
        at = f"{where}: fields[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"name", "kind", "dtype", "stored"}:
            raise FieldsError(f"{at} must be an object of name, kind, dtype and stored")
        values = {key: entry.get(key, "column" if key == "stored" else None) for key in ("name", "kind", "dtype",
                                                                                         "stored")}
        if not all(isinstance(value, str) for value in values.values()):
            raise FieldsError(f"{at}: name, kind, dtype and stored must be strings")
        if not _NAME.fullmatch(values["name"]):
            raise FieldsError(f"{at}: {values['name'][:64]!r} is not a field name (letters, digits, _; 64 at most)")
        if values["kind"] not in KINDS or values["stored"] not in STORED:
            raise FieldsError(f"{at}: kind must be one of {', '.join(KINDS)} and stored one of {', '.join(STORED)}")
        fields.append(FieldSpec(**values))
    seen: set[str] = set()
    for spec in fields:  # one set, not names.count per name: 80,000 fields took 98 s to name a repeat
        if spec.name in seen:
            raise FieldsError(f"{where}: field {spec.name!r} is declared twice")
        seen.add(spec.name)
    return tuple(fields)


def member_columns(name: str) -> tuple[str, str]:
    """Where each sample's member of field ``name`` lies in its shard (a member other than the image, whose
    ``offset`` and ``size`` are the table's own): the columns ``NAME_offset`` and ``NAME_size``."""
    return f"{name}_offset", f"{name}_size"


def declared_columns(fields: tuple[FieldSpec, ...]) -> frozenset[str]:
    """The sample-table columns the fields add beside its own: those stored as columns, and where each member
    other than the image lies (``member_columns``)."""
    names = {f.name for f in fields if f.stored == "column"}
    for f in fields:
        if f.stored == "member" and f.kind != "image":
            names.update(member_columns(f.name))
    return frozenset(names)


def holds_labels(fields: tuple[FieldSpec, ...]) -> bool:
    """Whether the samples have a class label (an image-text pair folder has none: its ``label`` column is -1)."""
    return any(f.kind == "class" for f in fields)
