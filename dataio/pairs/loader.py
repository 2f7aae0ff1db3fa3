"""``dataio.PairLoader``: image-text pairs (img2dataset tars through ``dataio index``, ``convert images --captions``)
as dict batches, for CLIP-style training.

The image kinds' face (``dataio.images.kind_loader``) over a pair folder: ``image`` as ``ImageLoader`` crops,
decodes, normalises and augments it, the caption's fields as ``captions`` asks (``CaptionConfig``: stored or
tokenised ids, the strings, keys, ``.json`` fields), ``sample_ids`` and ``repeated``. Every other keyword is
``ImageLoader``'s (``ImageLoaderConfig``) or ``torch.utils.data.DataLoader``'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.tokenizer_identity import note_pair_loader


class PairLoader(ImageKindLoader):
    """``PairLoader(folder, captions=CaptionConfig(...), batch_size=..., image_size=..., ...)``: dict batches of
    image-text pairs; ``vocab_size`` and ``pad_id`` size a text tower."""

    face = Capabilities(name="PairLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 captions: CaptionConfig | None = None, **options: Any) -> None:
        """Open the pair folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``;
        ``captions`` says which text fields each batch holds (default ``CaptionConfig()``: the stored ids, cut at
        77 tokens), ``options`` are ``ImageLoader``'s keywords."""
        self._build_face(source, config, kind="pairs", keyword="captions", options=captions, keywords=options)
        note_pair_loader(self)  # ids of another tokenizer than a live pair loader's: one warning line

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return super().__iter__()

    def batches(self) -> Iterator[dict[str, Any]]:
        """As ``for batch in loader``: the dicts carry ``sample_ids`` and ``repeated`` already."""
        return super().batches()

    @property
    def captions(self) -> CaptionConfig:
        """The caption options in use."""
        return self.options

