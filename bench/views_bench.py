"""``dataio bench views SRC``: multi-crop views for self-supervised training, dataio against DINOv2's recipe as users
run it, on the same photos, in one process.

SRC is an image folder (class folders or flat); when it holds no image, ``--photos`` photos of ``--photo-class``
are generated into it first. dataio packs it once (``dataio convert images --kind views``, not timed, skipped when
``SRC-views`` already holds its manifest). The rows, over the same images with the same worker or thread count,
batch size and views (2 x 224 px, 8 x 96 px, DINOv2's per-view colours as its released code applies them:
``ViewRecipe.dino_global_1(released=True)``):

- DINOv2's ``DataAugmentationDINO`` (``views_baseline``: torchvision's transforms on PIL images, each image decoded
  once by PIL, its 10 views cropped, resized, flipped and coloured per sample in ``--workers`` ``DataLoader``
  worker processes, collated as DINOv2's ``collate_data_and_cast``);
- dataio's ``ViewsLoader`` with ``--workers`` decode threads: each image decoded once, its views cropped from those
  pixels, coloured and normalised on the decode threads (the C kernel).

Each loader runs ``--warmup`` untimed epochs, then they take turns epoch by epoch for ``--epochs`` timed epochs
each; a row is the median images/s and CPU microseconds per image (its threads, or its worker processes), and the
JPEG decodes per image per epoch, counted (PIL's in the baseline's workers, the loader's own in dataio).
"""

from __future__ import annotations

import datetime
import multiprocessing
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from dataio.augment.view_params import ViewRecipe
from dataio.formats.dataset.manifest import MANIFEST_NAME, read_manifest
from dataio.formats.errors import ConfigError, UsageError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.image_tree import IMAGE_EXTENSIONS
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder
from dataio.views.loader import ViewsLoader
from dataio.views.views_config import ViewsConfig

from dataio.bench.image_baselines import Epoch, process_cpu_seconds
from dataio.bench.report import format_table, load_average, machine_description, write_results
from dataio.bench.views_baseline import ViewsDataset, live_workers, worker_init, collate_views, \
    dino_default_augmentation

ROWS = {"dinov2": "DINOv2 DataAugmentationDINO: PIL + torchvision transforms, DataLoader workers",
        "dataio": "dataio ViewsLoader: one decode, views coloured on the decode threads"}
RELEASED = ViewsConfig(global_recipes=(ViewRecipe.dino_global_1(released=True),
                                       ViewRecipe.dino_global_2(released=True)),
                       local_recipe=ViewRecipe.dino_local(released=True))


@dataclass(frozen=True, kw_only=True)
class BenchViewsConfig:
    """Options of the views benchmark (the module's docstring says what runs)."""

    src: Path
    out: Path = Path("bench/results")
    photos: int = 1000  # generated when src holds no image
    photo_class: str = "imagenet"
    batch_size: int = 64
    num_workers: int = field(default_factory=lambda: __import__("os").cpu_count() or 1)
    epochs: int = 3
    warmup: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", Path(self.src))
        object.__setattr__(self, "out", Path(self.out))
        for name in ("photos", "batch_size", "num_workers", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{{0}} must be >= 1, got {getattr(self, name)}", name)
        if self.warmup < 0:
            raise ConfigError(f"{{0}} must be >= 0, got {self.warmup}", "warmup")


def _images(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


def prepare(config: BenchViewsConfig, log=print) -> tuple[list[Path], Path]:
    """SRC's images (generated into a new or empty folder) and their views folder (packed once, not timed). A folder
    holding other files and no image (a shard folder, a user's notes) is refused: nothing is written among them."""
    src = config.src
    if src.exists() and not src.is_dir():
        raise UsageError(f"{src} is not a folder: give a folder of photos, or a new or empty one to generate into")
    if src.is_dir() and not _images(src) and any(src.iterdir()):
        raise UsageError(f"{src} holds no photo and is not empty: give a folder of photos, or a new or empty folder "
                         "to generate them into")
    if not _images(src):
        log(f"generating {config.photos} {config.photo_class} photos -> {src}")
        per_class = -(-config.photos // 4)
        write_image_folder(src, SyntheticImagesConfig(num_classes=4, images_per_class=per_class,
                                                      photo_class=config.photo_class, seed=config.seed))
    shards = src.parent / f"{src.name}-views"
    if not (shards / MANIFEST_NAME).is_file():
        log(f"dataio convert images {src} {shards} --kind views (not timed)")
        convert_images(ConvertImagesConfig(src=src, out=shards, kind="views", progress=False))
    return _images(src), shards


def _dinov2(files: list[Path], config: BenchViewsConfig, decodes: Any) -> Epoch:
    dataset = ViewsDataset(files, dino_default_augmentation(), decodes=decodes)
    loader = torch.utils.data.DataLoader(dataset, batch_size=config.batch_size, shuffle=True,
                                         num_workers=config.num_workers, collate_fn=collate_views, drop_last=True,
                                         persistent_workers=True, worker_init_fn=worker_init,
                                         generator=torch.Generator().manual_seed(config.seed))

    def close() -> None:
        iterator = getattr(loader, "_iterator", None)
        if iterator is not None and hasattr(iterator, "_shutdown_workers"):
            iterator._shutdown_workers()

    return Epoch(lambda: loader, lambda batch: len(batch["collated_global_crops"]) // 2, close,
                 worker_pids=lambda: live_workers(loader))


def _dataio(shards: Path, config: BenchViewsConfig) -> tuple[Epoch, ViewsLoader]:
    loader = ViewsLoader(shards, views=RELEASED, batch_size=config.batch_size, num_workers=config.num_workers,
                         normalize=True, channels_last=False, drop_last=True, seed=config.seed)
    loader.stats.stages.clock = time.thread_time  # its stage times in CPU seconds, as the image bench's
    return Epoch(lambda: loader, lambda batch: len(batch["sample_ids"]), loader.close, loader.stats), loader


def bench_views(config: BenchViewsConfig, log=print) -> dict[str, Any]:
    """Run the rows on SRC, print the table and ratio, write ``views.json`` and ``views.png``."""
    files, shards = prepare(config, log)
    _, manifest = read_manifest(shards)
    decodes = multiprocessing.Value("q", 0)
    dataio_epoch, loader = _dataio(shards, config)
    epochs = {"dinov2": _dinov2(files, config, decodes), "dataio": dataio_epoch}
    counted = {"dinov2": lambda: decodes.value, "dataio": lambda: loader.decodes}
    log(f"running {', '.join(ROWS)} ({config.num_workers} workers or threads each, an epoch of each in turn) ...")
    runs: dict[str, dict[str, list[float]]] = {name: {"images_s": [], "cpu_us": [], "decodes": []} for name in epochs}
    try:
        for name, epoch in epochs.items():
            for _ in range(config.warmup):
                epoch()
            if config.warmup:
                log(f"  {name} warmed up ({config.warmup} epoch{'s' if config.warmup > 1 else ''})")
        for _ in range(config.epochs):
            for name, epoch in epochs.items():
                before, workers = counted[name](), epoch.worker_cpu()
                cpu, start = time.process_time(), time.perf_counter()
                seen = epoch()
                wall = time.perf_counter() - start
                spent = time.process_time() - cpu + epoch.worker_cpu() - workers
                runs[name]["images_s"].append(seen / wall)
                runs[name]["cpu_us"].append(1e6 * spent / max(1, seen))
                runs[name]["decodes"].append((counted[name]() - before) / max(1, seen))
    finally:
        for epoch in epochs.values():
            epoch.close()
    rows = [{"loader": name, "label": ROWS[name], "epochs": r["images_s"], "images_s": statistics.median(r["images_s"]),
             "cpu_us_per_image": statistics.median(r["cpu_us"]), "decodes_per_image": statistics.median(r["decodes"])}
            for name, r in runs.items()]
    base = rows[0]
    for row in rows:
        row["vs_dinov2"] = row["images_s"] / base["images_s"]
        row["cpu_vs_dinov2"] = base["cpu_us_per_image"] / row["cpu_us_per_image"]
    sizes = [shard.bytes for shard in manifest.shards]
    result = {"benchmark": "views", "date": datetime.date.today().isoformat(), "machine": machine_description(),
              "load_average": load_average(), "num_images": manifest.num_samples,
              "mean_image_kb": sum(sizes) / max(1, manifest.num_samples) / 1e3,
              "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()
                         if k not in ("src", "out")},
              "views": "2 x 224 px (0.32-1.0), 8 x 96 px (0.05-0.32)", "rows": rows, "ratio": rows[1]["vs_dinov2"],
              "cpu_ratio": rows[1]["cpu_vs_dinov2"]}
    log(render(result))
    paths = write_results(config.out, "views", result, {r["label"]: r["images_s"] for r in rows}, "images/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def render(result: dict[str, Any]) -> str:
    m, c = result["machine"], result["config"]
    head = (f"dataio bench views, {result['date']}: {m['cpu']}, {m['cores']} cores, load average "
            f"{result['load_average']}; {result['num_images']} photos ({result['mean_image_kb']:.0f} KB each); "
            f"{result['views']}; batch {c['batch_size']}, {c['num_workers']} workers or threads; median of "
            f"{c['epochs']} epochs")
    table = format_table(result["rows"], [("label", "loader", "s"), ("images_s", "images/s", ",.0f"),
                                          ("vs_dinov2", "vs DINOv2", ".2f"),
                                          ("cpu_us_per_image", "CPU us/image", ",.0f"),
                                          ("cpu_vs_dinov2", "CPU vs DINOv2", ".2f"),
                                          ("decodes_per_image", "JPEG decodes/image", ".2f")])
    return "\n".join([head, table,
                      f"compared on this machine ({m['cpu']}, {m['cores']} cores) with DINOv2's recipe on the same "
                      f"photos: dataio ran at {result['ratio']:.2f}x its images/s ({result['cpu_ratio']:.2f}x by CPU "
                      f"time), decoding each image {result['rows'][1]['decodes_per_image']:.2f} times an epoch"])
