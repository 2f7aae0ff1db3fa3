"""``make demo``: build a small ImageNet-layout folder, convert it, benchmark the loaders.

Nothing is downloaded: the images are generated (``dataio.formats.images.synthetic``) once
and reused on the next run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dataio.bench.images import BenchImagesConfig, bench_images
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.dataset.manifest import MANIFEST_NAME
from dataio.formats.file_gate import write_atomic
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder


@dataclass(frozen=True, kw_only=True)
class DemoConfig:
    out: Path = Path("demo-data")
    num_classes: int = 10
    images_per_class: int = 200
    epochs: int = 3
    num_workers: int = 2


def run_demo(config: DemoConfig) -> dict:
    images, shards = config.out / "images", config.out / "shards"
    marker = images / ".complete"
    if not marker.exists():
        print(f"generating {config.num_classes} x {config.images_per_class} images in {images}")
        write_image_folder(images, SyntheticImagesConfig(num_classes=config.num_classes,
                                                         images_per_class=config.images_per_class))
        write_atomic(marker, b"")  # through the gate: never a link planted there
    if not (shards / MANIFEST_NAME).exists():
        summary = convert_images(ConvertImagesConfig(src=images, out=shards, shard_size="32MB",
                                                     num_workers=config.num_workers, overwrite=True))
        print(summary.line())
    return bench_images(BenchImagesConfig(src=images, shards=shards, out=config.out / "results",
                                          epochs=config.epochs, num_workers=config.num_workers))
