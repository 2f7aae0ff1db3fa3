"""The declared fields of a views folder: the image alone.

A views folder (``dataio convert images --kind views``) is an image folder (``kind="images"``: the same shards,
sample table and readers) whose samples have no class and nothing beside the image: its loader cuts several
crops of each image (DINO's global and local views), so the manifest declares the image member only, and the
sample table holds its own columns (where each image lies, its size, its source path, its checksum) and no
``label``.
"""

from __future__ import annotations

from typing import Any

from dataio.formats.dataset.sample_fields import FieldSpec, image_field


def declared_view_fields(options: dict[str, Any]) -> tuple[FieldSpec, ...]:
    """The fields of a views folder: the image member, in the encoding its manifest records (JPEG)."""
    return (image_field(options),)
