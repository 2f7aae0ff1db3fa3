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

import dataclasses
import logging

import torch

from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities
from dataio.views.views_config import ViewsConfig


log = logging.getLogger("dataio")


class ViewsLoader(ImageKindLoader):
    """``ViewsLoader(folder, views=ViewsConfig(...), batch_size=..., ...)``: dict batches of multi-crop views."""

    face = Capabilities(name="ViewsLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 views: ViewsConfig | None = None, **options: Any) -> None:
        """Open the image folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``; ``views``
        says which views (default ``ViewsConfig()``), ``options`` are ``ImageLoader``'s keywords."""
        self._build_face(source, config, kind="views", keyword="views", options=views, keywords=options)

    @staticmethod
    def dropin_defaults(options: dict[str, Any], *, where: str, shuffles: bool) -> None:
        """What ``dataio.DataLoader`` gives a views face: what a script's ``DataLoader(ImageFolder(folder,
        transform=DataAugmentationDINO(...)))`` yielded, ``(views, labels)`` (``ViewsConfig.output`` says
        otherwise when set), float32 normalised, contiguous NCHW; shuffled as ``shuffle`` says (views are random
        either way)."""
        views = options.get("views") or ViewsConfig()
        if views.output is None:
            options["views"] = dataclasses.replace(views, output="tuple")
        if options.get("config") is None:
            options.setdefault("normalize", True)
            options.setdefault("channels_last", False)
        log.info("dataio.DataLoader(%s): multi-crop views (random crops and colours whatever train= says), as "
                 "%s", where, "(views, labels)" if options["views"].output == "tuple" else "dicts")

    def __iter__(self) -> Iterator[Any]:
        """Dict batches (``view_finish``), or DINO's ``(views, labels)`` with ``ViewsConfig(output="tuple")``:
        ``views`` the list of the ``G + L`` views, ``labels`` the folder's (-1 without classes)."""
        if self.views.output != "tuple":
            return super().__iter__()
        return self._iterate(lambda moved, host: (moved["views"], moved.get(
            "label", torch.full((len(host),), -1, dtype=torch.int64, device=moved["views"][0].device))))

    def batches(self) -> Iterator[dict[str, Any]]:
        """One pass of the dict batches, whatever ``output`` says: they carry ``sample_ids`` and ``repeated``."""
        return super().batches()

    @property
    def views(self) -> ViewsConfig:
        """The views made of each image."""
        return self.options or ViewsConfig()

    @property
    def decodes(self) -> int:
        """Images decoded by this loader so far (each image once per epoch)."""
        return self.source.decodes
