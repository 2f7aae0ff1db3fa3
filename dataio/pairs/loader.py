"""``dataio.PairLoader``: image-text pairs (img2dataset tars through ``dataio index``, ``convert images --captions``)
as dict batches, for CLIP-style training.

The image kinds' face (``dataio.images.kind_loader``) over a pair folder: ``image`` as ``ImageLoader`` crops,
decodes, normalises and augments it, the caption's fields as ``captions`` asks (``CaptionConfig``: stored or
tokenised ids, the strings, keys, ``.json`` fields), ``sample_ids`` and ``repeated``. Every other keyword is
``ImageLoader``'s (``ImageLoaderConfig``) or ``torch.utils.data.DataLoader``'s, save one default: the evaluation
view is open_clip's (``val_crop_ratio=1.0``: the shorter side resized to ``image_size``, then centre-cropped), not
ImageNet's 0.875, unless ``val_crop_ratio=`` or ``config=`` says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig
from dataio.images.kind_loader import ImageKindLoader
from dataio.loader.dataloader_args import Capabilities
from dataio.pairs.caption_config import CaptionConfig
from dataio.pairs.tokenizer_identity import note_pair_loader


CLIP_VAL_CROP_RATIO = 1.0  # open_clip's image_transform(is_train=False): Resize(size) then CenterCrop(size)


class SampleCount(int):
    """An int that returns itself when called: ``loader.num_samples`` as open_clip reads it (wds's attribute) and
    ``loader.num_samples()`` as the other loaders' method is called."""

    def __call__(self) -> int:
        return int(self)


def _as_tuple(moved: Any, host: Any) -> Any:
    """open_clip's ``(images, texts)`` of a pair batch dict; one without ids is refused (a text tower needs ids)."""
    if isinstance(moved, tuple):
        return moved
    if "input_ids" not in moved:
        raise ConfigError("{0}='tuple' gives (images, input_ids), and this folder has no stored ids: pack it with "
                          "--tokenizer or pass CaptionConfig(tokenizer=...)", "output")
    return moved["image"], moved["input_ids"]


class PairLoader(ImageKindLoader):
    """``PairLoader(folder, captions=CaptionConfig(...), batch_size=..., image_size=..., ...)``: dict batches of
    image-text pairs; ``vocab_size`` and ``pad_id`` size a text tower."""

    face = Capabilities(name="PairLoader", threads=True)

    def __init__(self, source: str | Path | Mapping[str, str | Path], config: ImageLoaderConfig | None = None, *,
                 captions: CaptionConfig | None = None, **options: Any) -> None:
        """Open the pair folder (or URL, or a mixture's ``{name: folder}`` with ``weights``) ``source``;
        ``captions`` says which text fields each batch holds (default ``CaptionConfig()``: the stored ids, cut at
        77 tokens), ``options`` are ``ImageLoader``'s keywords."""
        if config is None:  # open_clip's evaluation view: the shorter side resized to the size, then centre-cropped
            options.setdefault("val_crop_ratio", CLIP_VAL_CROP_RATIO)
        self._build_face(source, config, kind="pairs", keyword="captions", options=captions, keywords=options)
        note_pair_loader(self)  # ids of another tokenizer than a live pair loader's: one warning line

    def __iter__(self) -> Iterator[Any]:
        """Dict batches, or open_clip's ``(images, input_ids)`` with ``CaptionConfig(output="tuple")`` (a
        ``batch_transform`` that returned a tuple already is passed on as it is)."""
        if self.captions.output != "tuple":
            return super().__iter__()
        return self._iterate(_as_tuple)

    def batches(self) -> Iterator[dict[str, Any]]:
        """As ``for batch in loader``: the dicts carry ``sample_ids`` and ``repeated`` already."""
        return super().batches()

    @property  # type: ignore[override]
    def num_samples(self) -> "SampleCount":
        """Samples of the next pass over all ranks (``epoch_samples()``, padding repeats included): open_clip's
        ``dataloader.num_samples``, the epoch's global count its progress line divides by (its csv loader's
        ``len(dataset)``), while ``num_batches`` is this rank's. An int that may still be called, as the loaders'
        method is; this rank's own count is ``rank_samples()``."""
        return SampleCount(self.epoch_samples())

    def rank_samples(self) -> int:
        """Samples this rank reads in the next pass, padding repeats included (the other loaders' ``num_samples()``)."""
        return super().num_samples()

    @property
    def num_batches(self) -> int:
        """Batches of the epoch on this rank, ``len(loader)`` (open_clip's ``dataloader.num_batches``)."""
        return len(self)

    @property
    def captions(self) -> CaptionConfig:
        """The caption options in use."""
        return self.options or CaptionConfig()

