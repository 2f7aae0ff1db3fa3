"""CLIP-style contrastive training on img2dataset output, in a loop of your own over ``dataio.DataLoader``.

img2dataset writes WebDataset tars whose samples are ``KEY.jpg``, ``KEY.txt`` (the caption) and
``KEY.json`` (url, size, status); ``dataio index`` adopts them in place (no copy) and can store the
captions' token ids with them. ``dataio.DataLoader`` over such a folder yields dict batches:

- ``image``: ``(N, 3, S, S)`` float32, normalised here with CLIP's mean and std; training crops are
  open_clip's (RandomResizedCrop of 90-100% of the area, no flip), validation a resize and centre crop;
- ``input_ids`` and ``attention_mask``: ``(N, L)`` int64, padded to the batch's longest caption and cut at
  ``--context-length`` tokens with the EOS kept last: the ids stored by ``dataio index``, or, with
  ``--tokenizer FILE``, the captions tokenised on the loader's decode threads;
- ``sample_ids`` and ``repeated`` (rows a rank repeats under torchrun so that every rank runs the same
  number of steps: left out of the loss and the recall), and on request ``caption``, ``key`` and fields
  of the ``.json`` (``dataio.CaptionConfig(text=True, keys=True, json_fields=("url",))``, printed once here).

The model is defined here (a small conv net and a small transformer, CLIP's symmetric contrastive loss
with a learned temperature); validation embeds the whole ``--val`` set and reports image-to-text and
text-to-image recall@1 and @5 (a caption written twice counts as the right answer for both pictures).

    img2dataset --url_list cc3m.tsv --input_format tsv --url_col url --caption_col caption \\
        --output_format webdataset --output_folder cc3m --image_size 256
    dataio index cc3m --train-tokenizer bpe --vocab-size 32000     # or: --tokenizer tokenizer.json
    python examples/clip_pairs.py cc3m --val cc3m-val --epochs 10 --image-size 224 --batch-size 256

A quick run: ``--steps 3 --image-size 64 --batch-size 8 --width 16``. ``dataio train --task clip`` does
the same with checkpoints, resume, AMP and DDP built in.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import nn

import dataio

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)  # OpenAI CLIP's, as open_clip normalises
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


class ImageTower(nn.Module):
    def __init__(self, width: int, dim: int) -> None:
        super().__init__()
        layers, channels = [], 3
        for out in (width, 2 * width, 4 * width, 4 * width):
            layers += [nn.Conv2d(channels, out, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            channels = out
        self.features, self.head = nn.Sequential(*layers), nn.Linear(channels, dim)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(image).mean((2, 3)))


class TextTower(nn.Module):
    """One pre-norm transformer layer over the caption; the EOS token's output (the last kept) is its feature."""

    def __init__(self, vocab_size: int, context: int, width: int, dim: int) -> None:
        super().__init__()
        self.embed, self.positions = nn.Embedding(vocab_size, width), nn.Embedding(context, width)
        self.layer = nn.TransformerEncoderLayer(width, nhead=2, dim_feedforward=4 * width, batch_first=True,
                                                norm_first=True, dropout=0.0)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.layer(self.embed(input_ids) + self.positions(positions), src_key_padding_mask=attention_mask == 0)
        last = attention_mask.sum(1) - 1  # rows are padded on the right: the EOS is the last kept token
        return self.head(self.norm(x[torch.arange(len(x)), last]))


class Clip(nn.Module):
    def __init__(self, vocab_size: int, context: int, width: int, dim: int = 64) -> None:
        super().__init__()
        self.image, self.text = ImageTower(width, dim), TextTower(vocab_size, context, 2 * width, dim)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))  # CLIP's initial temperature

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        images = F.normalize(self.image(batch["image"]), dim=-1)
        texts = F.normalize(self.text(batch["input_ids"], batch["attention_mask"]), dim=-1)
        return images, texts


def contrastive_loss(model: Clip, images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
    """CLIP's: cross-entropy of each picture against every caption of the batch, and of each caption, averaged."""
    logits = model.logit_scale.clamp(max=math.log(100)).exp() * images @ texts.T
    targets = torch.arange(len(images), device=images.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


@torch.no_grad()
def recall(model: Clip, loader) -> tuple[dict[str, float], int]:
    """Recall@1/@5 both ways over the whole set; pairs with the same caption are each other's right answers."""
    model.eval()
    images, texts, captions = [], [], []
    for batch in loader:
        keep = ~batch["repeated"]
        found_images, found_texts = model(batch)
        images.append(found_images[keep])
        texts.append(found_texts[keep])
        captions += [caption for caption, kept in zip(batch["caption"], keep.tolist()) if kept]
    model.train()
    images, texts = torch.cat(images), torch.cat(texts)
    same = torch.tensor([[a == b for b in captions] for a in captions])  # right answers, both ways
    scores = images @ texts.T
    out = {}
    for k in (1, 5):
        top_texts = scores.topk(min(k, len(captions)), dim=1).indices  # each picture's best captions
        top_images = scores.T.topk(min(k, len(captions)), dim=1).indices
        out[f"i2t_r{k}"] = same.gather(1, top_texts).any(1).float().mean().item()
        out[f"t2i_r{k}"] = same.gather(1, top_images).any(1).float().mean().item()
    return out, len(captions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, help="img2dataset tars indexed by `dataio index` (or a converted folder)")
    parser.add_argument("--val", type=Path, help="validation pairs (default: none)")
    parser.add_argument("--tokenizer", type=Path, help="a tokenizers JSON file: tokenise the captions as they are "
                                                       "read (default: the ids `dataio index` stored)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--context-length", type=int, default=77, help="caption tokens kept")
    parser.add_argument("--width", type=int, default=64, help="the towers' channels")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--workers", type=int, default=None, help="decode threads (default: the cores)")
    args = parser.parse_args()

    torch.manual_seed(0)
    captions = dataio.CaptionConfig(tokenizer=args.tokenizer, max_length=args.context_length, pad_to_max_length=True)
    common = dict(image_size=args.image_size, num_workers=args.workers, mean=CLIP_MEAN, std=CLIP_STD)
    loader = dataio.DataLoader(args.pairs, args.batch_size, shuffle=True, crop_scale=(0.9, 1.0), hflip=0.0,
                               captions=captions, **common)
    val = dataio.DataLoader(args.val, args.batch_size, shuffle=False, captions=dataio.CaptionConfig(
        tokenizer=args.tokenizer, max_length=args.context_length, pad_to_max_length=True, text=True), **common) \
        if args.val else None
    shown = dataio.DataLoader(args.pairs, 2, shuffle=False, captions=dataio.CaptionConfig(
        tokenizer=args.tokenizer, max_length=args.context_length, text=True, keys=True, json_fields=("url", "width")),
        **common)
    first = next(iter(shown))  # what a batch holds, with every optional field
    print("batch fields: " + ", ".join(
        f"{name} {tuple(value.shape)} {value.dtype}" if isinstance(value, torch.Tensor) else f"{name} {value[0]!r}"
        for name, value in first.items()))
    shown.close()

    tokenizer = Tokenizer.from_file(str(args.tokenizer or args.pairs / "tokenizer.json"))  # index saved it there
    model = Clip(tokenizer.get_vocab_size(), args.context_length, args.width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        losses = []
        for step, batch in enumerate(loader):
            if args.steps and step == args.steps:
                break
            keep = ~batch["repeated"]  # a pair twice in one batch would be its own negative
            images, texts = model(batch)
            loss = contrastive_loss(model, images[keep], texts[keep])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: {len(losses)} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}")
        if val is not None:
            metrics, count = recall(model, val)
            print(f"val: {count} pairs " + " ".join(f"{name}={value:.3f}" for name, value in metrics.items()))
    loader.close()
    if val is not None:
        val.close()


if __name__ == "__main__":
    main()
