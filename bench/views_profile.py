"""Where one DataLoader worker's time goes in the views baseline: each stage of DINOv2's recipe timed in-process.

``profile_stages`` runs what a worker runs (one torch thread, as DataLoader workers set) over some images: the
decode, then ``DataAugmentationDINO`` with each of its leaf transforms wrapped in a timer, then
``collate_views`` on batches. The wrappers sit inside ``RandomApply``, so a stage is timed (and counted) only
when it runs; ``applied_per_image`` says how often each changed the image (RandomGrayscale, RandomSolarize and
the flip decide inside, so they are timed on every view and count as applied when they return a new image).
What no stage covers (the ``RandomApply`` draws, building the dict) is ``other``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from dataio.bench.views_baseline import collate_views, dino_default_augmentation
from dataio.bench.views_transforms import (ColorJitter, Compose, GaussianBlur, Normalize, RandomApply,
                                           RandomGrayscale, RandomHorizontalFlip, RandomResizedCrop,
                                           RandomSolarize, ToTensor)

STAGE_OF = {RandomResizedCrop: "crop+resize", RandomHorizontalFlip: "flip", ColorJitter: "jitter",
            RandomGrayscale: "grayscale", GaussianBlur: "blur", RandomSolarize: "solarize"}
STAGES = ("decode", "crop+resize", "flip", "jitter", "grayscale", "blur", "solarize", "to-tensor+normalize",
          "collate", "other")


class _Timed:
    """A transform whose calls add their seconds, and one count when it returns a new object, to
    ``totals[stage]``."""

    def __init__(self, stage: str, transform: Callable[[Any], Any], totals: dict[str, list[float]]) -> None:
        self.stage, self.transform, self.totals = stage, transform, totals

    def __call__(self, img: Any) -> Any:
        start = time.perf_counter()
        out = self.transform(img)
        entry = self.totals[self.stage]
        entry[0] += time.perf_counter() - start
        entry[1] += out is not img
        return out


def _instrument(transform: Any, totals: dict[str, list[float]], done: set[int]) -> None:
    """Wrap, in place, every leaf transform inside ``transform``'s Compose / RandomApply lists (each list once:
    DINOv2 shares ``color_jittering`` between the three view pipelines)."""
    if not isinstance(transform, (Compose, RandomApply)) or id(transform) in done:
        return
    done.add(id(transform))
    for index, member in enumerate(transform.transforms):
        if isinstance(member, Compose) and [type(t) for t in member.transforms] == [ToTensor, Normalize]:
            transform.transforms[index] = _Timed("to-tensor+normalize", member, totals)  # one stage, once a view
        elif isinstance(member, (Compose, RandomApply)):
            _instrument(member, totals, done)
        elif type(member) in STAGE_OF:
            transform.transforms[index] = _Timed(STAGE_OF[type(member)], member, totals)


def profile_stages(files: Sequence[Path], *, batch_size: int = 64, seed: int = 0) -> dict[str, Any]:
    """Microseconds per image of each stage over ``files`` (decoded once each, in order), on one torch thread;
    ``collate`` is timed on full batches of ``batch_size`` and spread over their images."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    try:
        augmentation = dino_default_augmentation()
        totals: dict[str, list[float]] = {stage: [0.0, 0] for stage in STAGES}
        done: set[int] = set()
        for pipeline in (augmentation.geometric_augmentation_global, augmentation.geometric_augmentation_local,
                         augmentation.global_transfo1, augmentation.global_transfo2, augmentation.local_transfo):
            _instrument(pipeline, totals, done)
        pending: list[tuple[dict[str, Any], int]] = []
        augmenting = 0.0
        for path in files:
            start = time.perf_counter()
            image = Image.open(path).convert("RGB")
            decoded = time.perf_counter()
            pending.append((augmentation(image), 0))
            augmenting += time.perf_counter() - decoded
            totals["decode"][0] += decoded - start
            totals["decode"][1] += 1
            if len(pending) == batch_size:
                start = time.perf_counter()
                collate_views(pending)
                totals["collate"][0] += time.perf_counter() - start
                totals["collate"][1] += len(pending)
                pending = []
        stage_seconds = sum(totals[s][0] for s in STAGES if s not in ("decode", "collate", "other"))
        totals["other"] = [augmenting - stage_seconds, len(files)]
        collated = totals["collate"][1]
        per_image = {s: 1e6 * totals[s][0] / max(1, collated if s == "collate" else len(files)) for s in STAGES}
        return {"images": len(files), "batch_size": batch_size, "us_per_image": per_image,
                "total_us_per_image": sum(per_image.values()),
                "applied_per_image": {s: totals[s][1] / max(1, len(files)) for s in STAGES if s not in ("other",)}}
    finally:
        torch.set_num_threads(threads)
