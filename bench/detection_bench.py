"""``dataio bench detection IMAGES ANNOTATIONS``: dataio's detection loader against the standard detection recipe.

Both rows read the same images (those ``dataio convert coco`` packed, in the
shards' order) at the same thread count, in one run: the standard recipe
(``detection_baseline``: a ``Dataset`` over the files, PIL, SSD's box-aware crop,
flip and resize per sample, ``DataLoader`` worker processes) and
``dataio.DetectionLoader`` over the shards with ``DetectionConfig(crop="bbox")`` (the
same crop distribution, its flip and resize, decode threads), both to padded
batches of uint8 images and xyxy boxes. Each row is warmed up, then the two are
timed one epoch of each in turn (a shared machine's load drifts and hits both
sides of the ratio alike); the medians count. A row's CPU time per image (its
threads, or a DataLoader's processes) is recorded too: on a shared machine it
moves less than the rates. The machine and its load average (before and after)
are written with the results.
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataio.bench.detection_baseline import make_standard_detection
from dataio.bench.image_baselines import Epoch
from dataio.bench.shards_check import shards_of_kind
from dataio.bench.report import format_table, load_average, machine_description, write_results
from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.formats.errors import UsageError
from dataio.formats.files import sha256_file
from dataio.detection.detection_config import DetectionConfig
from dataio.detection.loader import DetectionLoader

ROWS = {"standard": "(a) standard: COCO Dataset + PIL + per-sample box-aware crop/flip/resize + DataLoader",
        "dataio": "(d) dataio.DetectionLoader, DetectionConfig(crop='bbox')"}


@dataclass(frozen=True, kw_only=True)
class BenchDetectionConfig:
    """Options of the detection benchmark (``shards``: an existing ``dataio convert coco`` of the images)."""

    images: Path
    annotations: Path
    shards: Path | None = None
    out: Path = Path("bench/results")
    batch_size: int = 32
    image_size: int = 300  # SSD300's input
    num_workers: int = field(default_factory=lambda: __import__("os").cpu_count() or 1)
    epochs: int = 3
    warmup: int = 1

    def __post_init__(self) -> None:
        for name in ("images", "annotations", "out"):
            object.__setattr__(self, name, Path(getattr(self, name)))
        if self.shards is not None:
            object.__setattr__(self, "shards", Path(self.shards))
        if self.epochs < 1 or self.warmup < 0 or self.batch_size < 1 or self.num_workers < 1 or self.image_size < 8:
            raise ValueError("epochs, batch_size and num_workers must be >= 1, warmup >= 0, image_size >= 8")


def _dataio_epoch(shards: Path, c: BenchDetectionConfig) -> tuple[Epoch, DetectionLoader]:
    loader = DetectionLoader(shards, batch_size=c.batch_size, image_size=c.image_size, train=True,
                             num_workers=c.num_workers, targets=DetectionConfig(crop="bbox"))
    return Epoch(lambda: loader, lambda batch: len(batch["image"]), loader.close, stats=loader.stats), loader


def _data(shards: Path) -> tuple[list[int], dict[str, Any]]:
    """The packed images' COCO ids (the baseline reads those, in that order) and what they hold."""
    folder, manifest = read_manifest(shards)
    table = read_sample_table(folder / manifest.sample_table, declared=manifest.table_columns())
    ids = table.table.column("image_id").to_pylist()
    boxes = sum(len(row) for row in table.table.column("labels").to_pylist())
    pixels = (table.width.astype(float) * table.height).mean() / 1e6 if len(table) else 0.0
    return ids, {"images": len(ids), "boxes": boxes, "classes": len(manifest.classes),
                 "mean_megapixels": round(float(pixels), 3)}


def _measure(epochs: dict[str, Epoch], c: BenchDetectionConfig, log: Any) -> list[dict[str, Any]]:
    """Warm-up epochs of each row, then the timed epochs in turn; each row's medians and its epochs."""
    for name, epoch in epochs.items():
        for _ in range(c.warmup):
            log(f"warming up {name} ...")
            epoch()
    timed: dict[str, list[tuple[float, float, int]]] = {name: [] for name in epochs}
    for round_ in range(c.epochs):
        for name, epoch in epochs.items():
            timed[name].append(_timed(epoch))
            log(f"epoch {round_ + 1}/{c.epochs} {name}: {timed[name][-1][0]:,.0f} img/s")
    return [{"loader": ROWS[name], "row": name, "img_s": statistics.median(r for r, _, _ in runs),
             "cpu_us_per_image": statistics.median(u for _, u, _ in runs),
             "epochs_img_s": [round(r, 1) for r, _, _ in runs], "epochs_images": [n for _, _, n in runs]}
            for name, runs in timed.items()]


def _timed(epoch: Epoch) -> tuple[float, float, int]:
    """images/s of one epoch, its CPU microseconds per image (this process and the loader's workers: steadier
    than the rate on a shared machine, as ``image_baselines.timed_with_cpu``) and the images it gave."""
    workers, cpu, start = epoch.worker_cpu(), time.process_time(), time.perf_counter()
    seen = epoch()
    wall = time.perf_counter() - start
    spent = time.process_time() - cpu + epoch.worker_cpu() - workers
    return seen / wall, 1e6 * spent / max(1, seen), seen


def check_shards(shards: Path, annotations: Path) -> None:
    """``--shards`` must be a box folder packed from ``annotations`` (the sha256 its manifest records), checked before
    anything runs or is written: a pair folder was ``KeyError: 'Field "image_id" does not exist'``, the shards of
    another annotation file ``KeyError: 101`` (an image id the JSON lacks), each a traceback after minutes."""
    _, manifest = shards_of_kind(shards, ("detection",), f"a `dataio convert coco` of {annotations.name}")
    packed_from = manifest.options.get("annotations_sha256")
    try:
        given = sha256_file(annotations)
    except OSError as e:
        raise UsageError(f"{annotations}: cannot read ({e.strerror or e})") from None
    if packed_from != given:
        raise UsageError(f"--shards {shards} was packed from {manifest.options.get('annotations', 'another file')!r} "
                         f"(sha256 {str(packed_from)[:12]}), not from {annotations} (sha256 {given[:12]}): give the "
                         "annotations it was packed from, or leave --shards out to convert these")


def bench_detection(c: BenchDetectionConfig, log: Any = print) -> dict[str, Any]:
    """Run both rows, print the table and the ratio, write ``detection.json`` (and ``.png``) into ``c.out``; given
    ``shards``, they are checked first (``check_shards``)."""
    if c.shards is not None:
        check_shards(c.shards, c.annotations)
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="dataio-bench-detection-") as tmp:
        shards = c.shards
        if shards is None:
            log(f"converting {c.images} with {c.annotations} ...")
            shards = Path(tmp) / "shards"
            convert_coco(ConvertCocoConfig(images=c.images, annotations=c.annotations, out=shards,
                                           num_workers=c.num_workers, progress=False))
        ids, data = _data(shards)
        standard = make_standard_detection(c.images, c.annotations, batch_size=c.batch_size, size=c.image_size,
                                           num_workers=c.num_workers, image_ids=ids)
        ours, loader = _dataio_epoch(shards, c)
        try:
            rows = _measure({"standard": standard, "dataio": ours}, c, log)
        finally:
            standard.close()
            loader.close()
    by_name = {row["row"]: row for row in rows}
    ratio = by_name["dataio"]["img_s"] / by_name["standard"]["img_s"]
    cpu_ratio = by_name["standard"]["cpu_us_per_image"] / by_name["dataio"]["cpu_us_per_image"]
    for row in rows:
        row["vs_standard"] = row["img_s"] / by_name["standard"]["img_s"]
    result = {"benchmark": "detection", "date": datetime.date.today().isoformat(), "machine": machine_description(),
              "load_average": {"before": load_before, "after": load_average()}, "data": data,
              "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(c).items()
                         if k not in ("images", "annotations", "shards", "out")},
              "rows": rows, "ratio": ratio, "cpu_ratio": cpu_ratio}
    log(render(result))
    paths = write_results(c.out, "detection", result, {r["loader"]: r["img_s"] for r in rows}, "images/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def render(result: dict[str, Any]) -> str:
    m, c, data, load = result["machine"], result["config"], result["data"], result["load_average"]
    shown = " / ".join(f"{v:.2f}" for v in load["before"] or []) or "unknown"
    head = (f"dataio bench detection, {result['date']}: {data['images']} images ({data['mean_megapixels']} MP mean), "
            f"{data['boxes']} boxes in {data['classes']} classes; crops {c['image_size']} px, batches of "
            f"{c['batch_size']}, {c['num_workers']} workers/threads each; median of {c['epochs']} epochs in turn "
            f"after {c['warmup']} warm-up")
    table = format_table(result["rows"], [("loader", "loader", "s"), ("img_s", "img/s", ",.0f"),
                                          ("vs_standard", "vs standard", ".2f"),
                                          ("cpu_us_per_image", "CPU us/img", ",.0f")])
    return "\n".join([
        head, table,
        f"compared on this machine ({m['cpu']}, {m['cores']} cores; load average {shown} before), the same images "
        f"and {c['num_workers']} threads each: dataio ran at {result['ratio']:.2f}x the standard detection recipe's "
        f"images/s, with {result['cpu_ratio']:.2f}x less CPU time per image"])
