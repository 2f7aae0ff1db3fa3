"""The views' packing (``dataio.formats.images.packing_kind``): every image of a source, nothing beside it.

``dataio convert images SRC OUT --kind views`` packs the images of any folder (flat or nested; its folders are
not classes) or the image column of Parquet files (``view_sources``) for a multi-crop (DINO) loader: each sample
stores its image and ``KEY.json`` (its source path and size), the table its own columns (``path`` included) and
no label, and the manifest declares the image field alone (``view_fields``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataio.formats.images.image_prepare import PreparedImage
from dataio.formats.images.image_tree import ImageTree
from dataio.formats.images.packing_kind import NOTHING_BESIDE, Beside, Sample
from dataio.formats.images.parquet_images import ParquetFiles, ParquetImages, ParquetRow
from dataio.formats.images.source_reads import source_of
from dataio.formats.views.view_sources import scan_parquet_views, walk_view_folder


class ViewPacking:
    """Images for multi-crop views."""

    name = "views"
    what = "images"
    located: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()

    def start(self, config: Any) -> None:
        return None

    def finish(self, columns: dict[str, Any], options: dict[str, Any], tokenizer: Any, out: Path) -> None:
        return None

    def check(self, config: Any) -> None:
        if config.classes_file is not None:
            raise ValueError("classes_file is for classes; views have none (kind 'views')")
        if config.tokenizer is not None:
            raise ValueError("tokenizer is for image-text pairs; views have no captions (kind 'views')")
        if config.format != "wds":
            raise ValueError("views are packed as WebDataset tars (format 'wds')")

    def folder(self, config: Any) -> ImageTree:
        return walk_view_folder(source_of(config))

    def parquet(self, files: ParquetFiles, config: Any) -> ParquetImages:
        return scan_parquet_views(files, image_column=config.image_column)

    def row_problem(self, row: ParquetRow, classes: list[str]) -> str | None:
        return None

    def file_beside(self, config: Any, relative: str) -> Beside:
        return NOTHING_BESIDE

    def row_beside(self, config: Any, row: ParquetRow) -> Beside:
        return NOTHING_BESIDE

    def options(self, config: Any, parquet: bool) -> dict[str, Any]:
        return {}

    def sample(self, path: str, label: int, prepared: PreparedImage) -> Sample:
        return Sample({}, {"path": path, "width": prepared.width, "height": prepared.height})


VIEW_PACKING = ViewPacking()
