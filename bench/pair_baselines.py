"""The baseline of the image-text pair benchmark: open_clip's data pipeline shape over img2dataset tars.

open_clip (``open_clip_train/data.py``, ``get_wds_dataset``; ``open_clip/transform.py``) reads
webdataset tars in ``DataLoader`` worker processes: shards split over the workers, a sample shuffle
buffer, the caption tokenised per sample, the image decoded by PIL, then ``RandomResizedCrop(size,
scale=(0.9, 1.0), interpolation=BICUBIC)``, RGB, ``ToTensor`` and ``Normalize`` with OpenAI's mean and
std in the worker, and ``batched``. This reproduces it:

- torchvision does not import here, so the crop is ``crop_boxes.random_resized_crop_boxes`` (its
  ``get_params``) and PIL's bicubic resize of the crop, as ``TF.resized_crop`` does on a PIL image;
  ``ToTensor`` and ``Normalize`` are the same arithmetic in torch (``normalize=False``: uint8
  ``PILToTensor``, as the classification baselines hand out);
- the caption goes through a HF ``tokenizers`` tokenizer (open_clip's own BPE would need its
  vocabulary file), truncated and padded to ``context_length``, with its attention mask;
- members are decoded by explicit handlers (PIL for ``.jpg``/``.jpeg``/``.png``/``.webp``, UTF-8
  for ``.txt``) and every other member is skipped unread: webdataset's default decoders unpickle
  ``.pyd``/``.pth`` members, so a crafted tar would run code in the bench. A sample without a picture
  or caption, with an empty caption (open_clip's ``FilterValidSample``, ``FilterNonEmptyText``) or
  one that does not decode is skipped with a warning, as open_clip's ``log_and_continue``.

``make_open_clip_style`` returns an ``Epoch`` like ``image_baselines``' makers: its batches are dicts
``image`` ``(N, 3, S, S)``, ``input_ids`` and ``attention_mask`` ``(N, L)`` int64, ``key`` (N strings).
"""

from __future__ import annotations

import inspect

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from dataio.augment import crop_boxes
from dataio.bench.image_baselines import Epoch, _dataloader_epoch
from dataio.formats.dataset import shard_members
from dataio.formats.errors import SampleError

IMAGE_MEMBERS = ("jpg", "jpeg", "png", "webp")  # img2dataset's encode_formats, in order of preference
CAPTION_MEMBER = "txt"
OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)  # open_clip's OPENAI_DATASET_MEAN / _STD
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)
SHUFFLE_BUFFER = 1000  # open_clip's is 5000 samples per worker; the bench's tars are smaller


def wanted_pair_member(name: str) -> bool:
    """Whether a tar member is read at all: the picture and the caption (``.json`` and the rest are skipped)."""
    return shard_members.member_extension(name) in (*IMAGE_MEMBERS, CAPTION_MEMBER)


def decode_pair(sample: dict[str, Any]) -> dict[str, Any]:
    """A webdataset sample -> ``{"image": RGB PIL image, "caption": str, "key": str}``; ``SampleError`` naming
    the shard and key when the picture or caption is missing or does not decode."""
    shard, key = str(sample.get("__url__", "?")), str(sample.get("__key__", "?"))
    name = next((ext for ext in IMAGE_MEMBERS if ext in sample), None)
    if name is None or CAPTION_MEMBER not in sample:
        raise SampleError(shard, key, f"needs an image ({', '.join(IMAGE_MEMBERS)}) and a .{CAPTION_MEMBER} member")
    try:
        caption = sample[CAPTION_MEMBER].decode("utf-8")
        image = shard_members.decode_image(sample[name])
    except (OSError, ValueError, SyntaxError, EOFError, Image.DecompressionBombError) as e:
        raise SampleError(shard, key, f"cannot decode ({type(e).__name__}: {e})") from None
    if not caption.strip():  # open_clip's FilterNonEmptyText
        raise SampleError(shard, key, "empty caption")
    return {"image": image, "caption": caption, "key": key}


class OpenClipStyleTrainTransform:
    """RandomResizedCrop(size, scale=(0.9, 1.0), bicubic) + ToTensor + Normalize(OpenAI), on PIL images."""

    def __init__(self, size: int, *, scale: tuple[float, float] = (0.9, 1.0), normalize: bool = True,
                 seed: int = 0) -> None:
        self.size, self.scale, self.normalize, self.seed = size, scale, normalize, seed
        self.rng: np.random.Generator | None = None
        self.mean = torch.tensor(OPENAI_MEAN).view(3, 1, 1)
        self.std = torch.tensor(OPENAI_STD).view(3, 1, 1)

    def __call__(self, image: Image.Image) -> torch.Tensor:
        if self.rng is None:  # drawn in the worker: each worker its own stream
            info = torch.utils.data.get_worker_info()
            self.rng = np.random.default_rng(self.seed * 1000 + (info.id if info is not None else 0))
        box = crop_boxes.random_resized_crop_boxes(np.array([image.width]), np.array([image.height]), self.rng,
                                                   self.scale, (3 / 4, 4 / 3))[0]
        x0, y0, x1, y1 = (int(v) for v in box)
        image = image.crop((x0, y0, x1, y1)).resize((self.size, self.size), Image.Resampling.BICUBIC)
        pixels = torch.from_numpy(np.array(image)).permute(2, 0, 1)  # PILToTensor
        if not self.normalize:
            return pixels
        return (pixels.float().div_(255) - self.mean).div_(self.std)  # ToTensor + Normalize


class CaptionTokenizer:
    """A ``tokenizers`` tokenizer that truncates and pads every caption to ``context_length`` tokens."""

    def __init__(self, tokenizer: Any, context_length: int, pad_token: str = "<pad>") -> None:
        from tokenizers import Tokenizer  # lazy, as webdataset: only this baseline needs them here

        from dataio.formats.text.tokenizer_setup import read_tokenizer_text

        if isinstance(tokenizer, (str, Path)):  # read as dataio reads one (the gate: regular file, bounded)
            tokenizer = Tokenizer.from_str(read_tokenizer_text(Path(tokenizer)))
        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())  # a copy: the caller's settings stay
        pad_id = self.tokenizer.token_to_id(pad_token)
        self.tokenizer.enable_truncation(max_length=context_length)
        self.tokenizer.enable_padding(length=context_length, pad_id=0 if pad_id is None else pad_id,
                                      pad_token=pad_token)

    def __call__(self, caption: str) -> dict[str, torch.Tensor]:
        encoding = self.tokenizer.encode(caption)
        return {"input_ids": torch.tensor(encoding.ids, dtype=torch.int64),
                "attention_mask": torch.tensor(encoding.attention_mask, dtype=torch.int64)}


class PairSample:
    """decode -> tokenise -> transform: one sample of the pipeline (a class, so worker processes get it pickled)."""

    def __init__(self, transform: OpenClipStyleTrainTransform, tokenizer: CaptionTokenizer) -> None:
        self.transform, self.tokenizer = transform, tokenizer

    def __call__(self, sample: dict[str, Any]) -> dict[str, Any]:
        pair = decode_pair(sample)
        return {"image": self.transform(pair["image"]), **self.tokenizer(pair["caption"]), "key": pair["key"]}


def collate_pairs(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Stacked ``image``, ``input_ids``, ``attention_mask``; ``key`` as a list."""
    return {"image": torch.stack([s["image"] for s in samples]),
            "input_ids": torch.stack([s["input_ids"] for s in samples]),
            "attention_mask": torch.stack([s["attention_mask"] for s in samples]),
            "key": [s["key"] for s in samples]}


def webdataset_options(wds: Any, seed: int) -> dict[str, Any]:
    """``WebDataset``'s keywords that differ by version, feature-detected: 1.x takes ``empty_check`` and ``seed``;
    0.2.86 (the floor dataio declares, and the only one ``open_clip_torch[training]`` shares with it) takes neither
    and seeds its shard shuffle with ``detshuffle``."""
    takes = inspect.signature(wds.WebDataset.__init__).parameters
    if "seed" in takes:
        return {"empty_check": False, "seed": seed} if "empty_check" in takes else {"seed": seed}
    return {"detshuffle": True} if "detshuffle" in takes else {}


def make_open_clip_style(shards: Iterable[Path], *, batch_size: int, size: int, num_workers: int, tokenizer: Any,
                         context_length: int = 77, normalize: bool = True, seed: int = 0) -> Epoch:
    """open_clip's training pipeline over ``shards`` (img2dataset tars) under ``DataLoader(num_workers)``.

    ``tokenizer``: a ``tokenizers.Tokenizer`` or the path of its JSON file. Each worker reads its share of the
    shards (webdataset's ``split_by_worker``), so give at least ``num_workers`` shards.
    """
    import webdataset as wds  # deliberately lazy here: only this baseline needs it

    urls = [str(Path(s).resolve()) for s in shards]  # absolute: a name like "pipe:..." would run a command
    work = PairSample(OpenClipStyleTrainTransform(size, normalize=normalize, seed=seed),
                      CaptionTokenizer(tokenizer, context_length))
    dataset = (
        wds.WebDataset(urls, shardshuffle=len(urls), select_files=wanted_pair_member, **webdataset_options(wds, seed))
        .shuffle(SHUFFLE_BUFFER)
        .map(work, handler=wds.warn_and_continue)
        .batched(batch_size, collation_fn=collate_pairs, partial=True)
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=num_workers,
                                         persistent_workers=num_workers > 0)
    base = _dataloader_epoch(loader)  # its worker handling, counting pairs instead of (images, labels)
    return Epoch(base.batches, lambda batch: len(batch["key"]), base.close,  # type: ignore[index]
                 worker_pids=base.worker_pids)


def img2dataset_tars(folder: Path) -> list[Path]:
    """The tars of an img2dataset output folder, in name order (its ``.parquet`` and ``_stats.json`` left out)."""
    return sorted(Path(folder).glob("*.tar"))
