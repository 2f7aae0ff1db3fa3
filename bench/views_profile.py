"""Where one DataLoader worker's time goes in the views baseline: each stage of DINOv2's recipe timed in-process.

``profile_stages`` runs what a worker runs (one torch thread, as DataLoader workers set) over some images: the
decode, then ``DataAugmentationDINO`` with each of its leaf transforms wrapped in a timer, then
``collate_views`` on batches. The wrappers sit inside ``RandomApply``, so a stage is timed (and counted) only
when it runs; ``applied_per_image`` says how often each changed the image (RandomGrayscale, RandomSolarize and
the flip decide inside, so they are timed on every view and count as applied when they return a new image).
What no stage covers (the ``RandomApply`` draws, building the dict) is ``other``.

Each stage is timed twice: the thread's CPU time (``time.thread_time``: PIL and torch, on one thread, run in the
calling thread), which a busy shared machine changes little, and the wall time, which it inflates.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from dataio.formats.file_gate import read_input
from dataio.formats.limits import MAX_FILE_BYTES
from dataio.bench.views_baseline import collate_views, dino_default_augmentation
from dataio.bench.views_transforms import (ColorJitter, Compose, GaussianBlur, Normalize, RandomApply,
                                           RandomGrayscale, RandomHorizontalFlip, RandomResizedCrop,
                                           RandomSolarize, ToTensor)

STAGE_OF = {RandomResizedCrop: "crop+resize", RandomHorizontalFlip: "flip", ColorJitter: "jitter",
            RandomGrayscale: "grayscale", GaussianBlur: "blur", RandomSolarize: "solarize"}
STAGES = ("decode", "crop+resize", "flip", "jitter", "grayscale", "blur", "solarize", "to-tensor+normalize",
          "collate", "other")


class _Totals:
    """Per stage: CPU seconds, wall seconds and how many times it changed its input."""

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(STAGES, 0.0)
        self.wall = dict.fromkeys(STAGES, 0.0)
        self.applied = dict.fromkeys(STAGES, 0)

    def add(self, stage: str, start: tuple[float, float], applied: int = 1) -> None:
        """Charge ``stage`` with the time since ``start`` (a ``_now()``)."""
        cpu, wall = _now()
        self.cpu[stage] += cpu - start[0]
        self.wall[stage] += wall - start[1]
        self.applied[stage] += applied


def _now() -> tuple[float, float]:
    return time.thread_time(), time.perf_counter()


class _Timed:
    """A transform charging its calls to ``stage``, counted as applied when it returns a new object."""

    def __init__(self, stage: str, transform: Callable[[Any], Any], totals: _Totals) -> None:
        self.stage, self.transform, self.totals = stage, transform, totals

    def __call__(self, img: Any) -> Any:
        start = _now()
        out = self.transform(img)
        self.totals.add(self.stage, start, out is not img)
        return out


def _instrument(transform: Any, totals: _Totals, done: set[int]) -> None:
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
    """Microseconds of CPU (``us_per_image``) and of wall time (``wall_us_per_image``) per image of each stage
    over ``files`` (decoded once each, in order), on one torch thread; ``collate`` is timed on full batches of
    ``batch_size`` and spread over their images."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    try:
        augmentation = dino_default_augmentation()
        totals = _Totals()
        done: set[int] = set()
        for pipeline in (augmentation.geometric_augmentation_global, augmentation.geometric_augmentation_local,
                         augmentation.global_transfo1, augmentation.global_transfo2, augmentation.local_transfo):
            _instrument(pipeline, totals, done)
        pending: list[tuple[dict[str, Any], int]] = []
        for path in files:
            start = _now()
            image = Image.open(io.BytesIO(read_input(path, MAX_FILE_BYTES))).convert("RGB")  # the gate
            totals.add("decode", start)
            start = _now()
            pending.append((augmentation(image), 0))
            totals.add("other", start)  # the whole augmentation, its stages taken out below
            if len(pending) == batch_size:
                start = _now()
                collate_views(pending)
                totals.add("collate", start, len(pending))
                pending = []
        inner = [s for s in STAGES if s not in ("decode", "collate", "other")]
        for clock in (totals.cpu, totals.wall):
            clock["other"] -= sum(clock[s] for s in inner)
        count = {s: max(1, totals.applied["collate"] if s == "collate" else len(files)) for s in STAGES}
        cpu = {s: 1e6 * totals.cpu[s] / count[s] for s in STAGES}
        wall = {s: 1e6 * totals.wall[s] / count[s] for s in STAGES}
        return {"images": len(files), "batch_size": batch_size, "us_per_image": cpu,
                "total_us_per_image": sum(cpu.values()), "wall_us_per_image": wall,
                "total_wall_us_per_image": sum(wall.values()),
                "applied_per_image": {s: totals.applied[s] / max(1, len(files)) for s in STAGES if s != "other"}}
    finally:
        torch.set_num_threads(threads)
