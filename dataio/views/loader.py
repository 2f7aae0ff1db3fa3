"""``dataio.ViewsLoader``: multi-crop views for self-supervised training (DINO, DINOv2, iBOT), each image decoded
once per epoch.

The image kinds' face (``dataio.images.kind_loader``) over any image folder: one packed with ``dataio convert images
--kind views`` (images without classes), or a classification folder (its labels come along as ``label``). ``views``
says how many views of which sizes, crops and colours (``ViewsConfig``: DINOv2's recipe by default); every other
keyword is ``ImageLoader``'s (``ImageLoaderConfig``: batch size, seed, ranks, ``num_workers``, ``normalize``,
``decoder``, remote storage, the error policy, ...) or ``torch.utils.data.DataLoader``'s. Views are random whatever
``train`` says (``train`` sets the shuffle's default, as for the other kinds). Batches: ``dataio.views.view_finish``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities
from dataio.views.views_config import ViewsConfig


class ViewsLoader(ImageKindLoader):
    """``ViewsLoader(folder, views=ViewsConfig(...), batch_size=..., ...)``: dict batches of multi-crop views."""

    face = Capabilities(name="ViewsLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 views: ViewsConfig | None = None, **options: Any) -> None:
        """Open the image folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``; ``views``
        says which views (default ``ViewsConfig()``), ``options`` are ``ImageLoader``'s keywords."""
        self._build_face(source, config, kind="views", keyword="views", options=views, keywords=options)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return super().__iter__()

    def batches(self) -> Iterator[dict[str, Any]]:
        """As ``for batch in loader``: the dicts carry ``sample_ids`` and ``repeated`` already."""
        return super().batches()

    @property
    def views(self) -> ViewsConfig:
        """The views made of each image."""
        return self.options

    @property
    def decodes(self) -> int:
        """Images decoded by this loader so far (each image once per epoch)."""
        return self.source.decodes
