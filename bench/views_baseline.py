"""The baseline of the views benchmark: DINOv2's multi-crop recipe as users run it today.

A map-style ``Dataset`` over image files that decodes each image once with PIL (``Image.open(path).convert("RGB")``,
what DINOv2's ``ImageDataDecoder`` does), then DINOv2's ``DataAugmentationDINO``: 2 global views (224 px) and 8 local
ones (96 px), each its own RandomResizedCrop + flip + colour jitter + grayscale + blur (+ solarize on the second
global view) + ToTensor + Normalize, on the PIL image, one sample at a time in ``DataLoader`` worker processes;
then DINOv2's ``collate_data_and_cast`` without the masks. The transforms are ``views_transforms``' copies of
torchvision's (it does not import here), drawing from torch's generator as torchvision does.

DINOv2's ``GaussianBlur(p)`` hands ``1 - p`` to ``RandomApply`` (its comment misreads RandomApply's ``p`` as the
chance of keeping the image): its code blurs the first global view with probability 0, the second with 0.9 and
the local views with 0.5, the reverse of what the arguments say (facebookresearch/dinov2 PR #411; DINOv3
issue #286). The released models were trained that way, and this copy does the same.
"""

from __future__ import annotations

import io
import multiprocessing
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image, ImageFile

from dataio.formats.file_gate import read_input
from dataio.formats.limits import MAX_FILE_BYTES
from dataio.bench.views_transforms import (ColorJitter, Compose, GaussianBlur, Normalize, RandomApply,
                                           RandomGrayscale, RandomHorizontalFlip, RandomResizedCrop,
                                           RandomSolarize, ToTensor)

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)
GLOBAL_CROPS_SCALE = (0.32, 1.0)  # dinov2/configs/ssl_default_config.yaml
LOCAL_CROPS_SCALE = (0.05, 0.32)
LOCAL_CROPS_NUMBER = 8


class DinoGaussianBlur(RandomApply):
    """``dinov2.data.transforms.GaussianBlur``: torchvision's ``GaussianBlur(9, (0.1, 2.0))`` under a
    ``RandomApply`` given ``1 - p`` (so it blurs with probability ``1 - p``; see the module's docstring)."""

    def __init__(self, *, p: float = 0.5, radius_min: float = 0.1, radius_max: float = 2.0) -> None:
        super().__init__([GaussianBlur(kernel_size=9, sigma=(radius_min, radius_max))], p=1 - p)


class DataAugmentationDINO:
    """``dinov2.data.augmentations.DataAugmentationDINO``, same arguments: a PIL image to DINOv2's dict of views
    (``global_crops``, ``global_crops_teacher`` (the same two tensors), ``local_crops``, ``offsets``)."""

    def __init__(self, global_crops_scale: tuple[float, float], local_crops_scale: tuple[float, float],
                 local_crops_number: int, global_crops_size: int = 224, local_crops_size: int = 96) -> None:
        self.global_crops_scale, self.local_crops_scale = global_crops_scale, local_crops_scale
        self.local_crops_number = local_crops_number
        self.global_crops_size, self.local_crops_size = global_crops_size, local_crops_size
        bicubic = Image.Resampling.BICUBIC
        self.geometric_augmentation_global = Compose([
            RandomResizedCrop(global_crops_size, scale=global_crops_scale, interpolation=bicubic),
            RandomHorizontalFlip(p=0.5)])
        self.geometric_augmentation_local = Compose([
            RandomResizedCrop(local_crops_size, scale=local_crops_scale, interpolation=bicubic),
            RandomHorizontalFlip(p=0.5)])
        color_jittering = Compose([
            RandomApply([ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
            RandomGrayscale(p=0.2)])
        global_transfo1_extra = DinoGaussianBlur(p=1.0)
        global_transfo2_extra = Compose([DinoGaussianBlur(p=0.1), RandomSolarize(threshold=128, p=0.2)])
        local_transfo_extra = DinoGaussianBlur(p=0.5)
        self.normalize = Compose([ToTensor(), Normalize(mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD)])
        self.global_transfo1 = Compose([color_jittering, global_transfo1_extra, self.normalize])
        self.global_transfo2 = Compose([color_jittering, global_transfo2_extra, self.normalize])
        self.local_transfo = Compose([color_jittering, local_transfo_extra, self.normalize])

    def __call__(self, image: Image.Image) -> dict[str, Any]:
        global_crop_1 = self.global_transfo1(self.geometric_augmentation_global(image))
        global_crop_2 = self.global_transfo2(self.geometric_augmentation_global(image))
        local_crops = [self.local_transfo(self.geometric_augmentation_local(image))
                       for _ in range(self.local_crops_number)]
        return {"global_crops": [global_crop_1, global_crop_2], "global_crops_teacher": [global_crop_1, global_crop_2],
                "local_crops": local_crops, "offsets": ()}


def dino_default_augmentation() -> DataAugmentationDINO:
    """DataAugmentationDINO with DINOv2's default configuration (``ssl_default_config.yaml``)."""
    return DataAugmentationDINO(GLOBAL_CROPS_SCALE, LOCAL_CROPS_SCALE, LOCAL_CROPS_NUMBER)


_decode_counter: Any = None  # this process's shared counter, once count_decodes has run in it


def count_decodes(counter: Any) -> None:
    """Count every PIL decode this process makes into ``counter`` (a ``multiprocessing.Value``): PIL's
    ``ImageFile.load`` is wrapped to add one when it still has tiles to decode (a loaded image's ``load()``
    returns early and is not counted). It counts what PIL does, not what the Dataset means to do, so a second
    decode anywhere in the worker (a transform reopening the file) would show."""
    global _decode_counter
    if _decode_counter is None:
        original = ImageFile.ImageFile.load

        def load(self: ImageFile.ImageFile) -> Any:
            if self.tile and _decode_counter is not None:
                with _decode_counter.get_lock():
                    _decode_counter.value += 1
            return original(self)

        ImageFile.ImageFile.load = load  # type: ignore[method-assign]
    _decode_counter = counter


class ViewsDataset(torch.utils.data.Dataset):
    """Image files, each item ``(transform(Image.open(path).convert("RGB")), label)``: one decode per item.
    ``decodes``: a shared counter the DataLoader's workers count PIL decodes into (``count_decodes``)."""

    def __init__(self, files: Sequence[Path], transform: DataAugmentationDINO, labels: Sequence[int] | None = None,
                 decodes: Any = None) -> None:
        self.files, self.transform, self.decodes = list(files), transform, decodes
        self.labels = list(labels) if labels is not None else [0] * len(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[dict[str, Any], int]:
        image = Image.open(io.BytesIO(read_input(self.files[index], MAX_FILE_BYTES))).convert("RGB")  # the gate
        return self.transform(image), self.labels[index]


def collate_views(samples: list[tuple[dict[str, Any], int]], dtype: torch.dtype = torch.half) -> dict[str, Any]:
    """``dinov2.data.collate.collate_data_and_cast`` without the masks: view-major stacks (every sample's first
    global crop, then every sample's second; the local crops likewise), cast to ``dtype`` (half: DINOv2's
    ``train.py`` passes ``torch.half``)."""
    n_global_crops = len(samples[0][0]["global_crops"])
    n_local_crops = len(samples[0][0]["local_crops"])
    collated_global_crops = torch.stack([s[0]["global_crops"][i] for i in range(n_global_crops) for s in samples])
    collated_local_crops = torch.stack([s[0]["local_crops"][i] for i in range(n_local_crops) for s in samples])
    return {"collated_global_crops": collated_global_crops.to(dtype),
            "collated_local_crops": collated_local_crops.to(dtype)}


def worker_init(worker_id: int) -> None:
    info = torch.utils.data.get_worker_info()
    dataset = info.dataset if info is not None else None
    if isinstance(dataset, ViewsDataset) and dataset.decodes is not None:
        count_decodes(dataset.decodes)


def live_workers(loader: torch.utils.data.DataLoader) -> list[int]:
    """The pids of a persistent-workers DataLoader's worker processes (none before its first epoch)."""
    iterator = getattr(loader, "_iterator", None)
    return [w.pid for w in getattr(iterator, "_workers", ()) if w.pid is not None]


def run_baseline(files: list[Path], *, batch_size: int, workers: int, epochs: int, warmup: int,
                 seed: int) -> dict[str, Any]:
    """``warmup`` then ``epochs`` passes of the DINOv2 recipe under ``DataLoader(shuffle=True, drop_last=True,
    persistent_workers=True)``; per measured epoch the images/s (wall, ``iter()`` to the last batch) and the CPU
    microseconds per image.

    CPU time: ``getrusage(RUSAGE_CHILDREN)`` only counts children that have exited and been waited for, and
    persistent workers live until the loader goes, so each worker's user + system time is read from
    ``/proc/<pid>/stat`` (all its threads) before and after each epoch, plus this process's
    ``time.process_time()`` (the main process unpickles the batches). ``decodes_per_image``: PIL decodes counted
    in the workers (``count_decodes``) over the measured epochs, per image delivered."""
    # lazy: image_baselines imports kornia (1.4 s of a 5 s import on the busy VM), needed only to run the loader
    from dataio.bench.image_baselines import process_cpu_seconds

    decodes = multiprocessing.Value("q", 0)
    dataset = ViewsDataset(files, dino_default_augmentation(), decodes=decodes)
    if workers == 0:
        count_decodes(decodes)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                                         collate_fn=collate_views, drop_last=True, persistent_workers=workers > 0,
                                         worker_init_fn=worker_init, generator=torch.Generator().manual_seed(seed))
    rates, cpu_us, measured_images, measured_decodes = [], [], 0, 0
    shapes: dict[str, list[int]] = {}
    for epoch in range(warmup + epochs):
        before = {pid: process_cpu_seconds(pid) for pid in live_workers(loader)}
        decoded, cpu, start = decodes.value, time.process_time(), time.perf_counter()
        seen = 0
        for batch in loader:
            seen += len(batch["collated_global_crops"]) // 2
            shapes = shapes or {k: list(v.shape) for k, v in batch.items()}
        wall = time.perf_counter() - start
        spent = time.process_time() - cpu
        spent += sum(process_cpu_seconds(pid) - before.get(pid, 0.0) for pid in live_workers(loader))
        if epoch >= warmup:
            rates.append(seen / wall)
            cpu_us.append(1e6 * spent / max(1, seen))
            measured_images += seen
            measured_decodes += decodes.value - decoded
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
    return {"images_per_epoch": len(loader) * batch_size, "batch_size": batch_size, "workers": workers,
            "epochs": epochs, "warmup": warmup, "images_per_s": rates, "cpu_us_per_image": cpu_us,
            "images_per_s_median": statistics.median(rates) if rates else None,
            "cpu_us_per_image_median": statistics.median(cpu_us) if cpu_us else None,
            "decodes_per_image": measured_decodes / measured_images if measured_images else None,
            "batch_shapes": shapes}
