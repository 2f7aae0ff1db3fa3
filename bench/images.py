"""``dataio bench images SRC``: loader images/s against what users run today.

All loaders read the same images on the same machine in one run: the source
folder (standard recipe) or its shards (the others), full path to a batch of
uint8 crops. Loaders run one at a time (co-resident DataLoader workers and
DALI's prefetching threads were measured to slow each other by ~25%): each is
built, warmed up (``warmup`` epochs), timed over ``epochs`` epochs and shut
down before the next. The exceptions: ``dataio_auto`` and the fixed-thread
rows ``dataio_t<n>`` are compared with each other, and the rows whose ratio to
the standard recipe is the point (``standard``, ``shard_dataset``, ``dataio``
and the eval-mode pair ``standard_eval`` / ``dataio_eval``), so each set is
built together and timed one epoch of each in turn (their threads and workers
idle while another runs): on the shared 2-core VM load from other processes
moves by tens of percent within a minute, and epochs in turn let it hit both
sides of a ratio alike. Eval mode is the validation half of every epoch:
torchvision's Resize + CenterCrop against ``train=False``. Each row's CPU time
per image (its threads, or a DataLoader's processes) is recorded too: its
ratio moves less with the machine's load than the rates'. The machine-limit loop (bare single-thread full decode +
crop, times the cores) is timed again before each loader, so a shared
machine's drift shows in the limit too. Medians are reported, with the ratio
to the standard recipe and the share of the machine's limit. dataio decodes
only the crop's region, so it can pass that limit; the same loop over
dataio's own per-image path (over the packed files, restart intervals
included) gives its parallel efficiency, and ``stage_limits`` sets each of
dataio's stages beside the same work on one thread. ``photo_classes`` runs the
ratio rows on each class of photo size (``--photo-classes``).
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from dataio.bench import image_baselines as baselines
from dataio.bench import stage_limits
from dataio.bench.images_checks import (EVAL_ROWS, auto_check, checks, checksum_cost, is_turbo, limit_modes,
                                       mean_megapixels)
from dataio.bench.images_report import STAGES, render
from dataio.bench.report import load_average, machine_description, write_results
from dataio.bench.shards_check import shards_of_kind
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.image_prepare import ImagePrepareConfig
from dataio.formats.images.synthetic import PHOTO_CLASSES
from dataio.formats.remote.storage import StorageOptions, redact
from dataio.images.dali_install import dali_installed, install_hint



@dataclass(frozen=True, kw_only=True)
class BenchImagesConfig:
    """Options of the image loader benchmark."""

    src: Path
    out: Path = Path("bench/results")
    shards: Path | None = None  # an existing conversion of src; converted on the fly if None
    batch_size: int = 256
    image_size: int = 224
    num_workers: int = field(default_factory=lambda: __import__("os").cpu_count() or 1)
    epochs: int = 3
    warmup: int = 1
    rounds: int = 1  # the whole loader sequence again: drift on a shared machine then hits every loader
    loaders: tuple[str, ...] = ()  # empty: default_loaders(), or PHOTO_LOADERS with photo_classes
    remote: str | None = None  # the same shards at an fsspec URL: its rows are timed beside the local ones
    storage_options: Any = None  # for ``remote``: a dict, held as StorageOptions (never printed or written)
    # photo classes of formats.synthetic (small, imagenet, camera): SRC/<class> for each, generated if absent
    # (photo_images of each, default photo_classes.DEFAULT_IMAGES), the ratio rows run on each
    photo_classes: tuple[str, ...] = ()
    photo_images: int | None = None
    limit_images: int = 1000  # samples the single-thread stage limits decode (stage_limits)

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", Path(self.src))
        object.__setattr__(self, "out", Path(self.out))
        object.__setattr__(self, "storage_options", StorageOptions.of(self.storage_options))
        if not self.loaders:
            object.__setattr__(self, "loaders", PHOTO_LOADERS if self.photo_classes else default_loaders())
        object.__setattr__(self, "loaders", tuple(self.loaders))
        unknown_classes = set(self.photo_classes) - set(PHOTO_CLASSES)
        if unknown_classes:
            raise ValueError(f"photo_classes: unknown {sorted(unknown_classes)}; "
                             f"choose from {', '.join(PHOTO_CLASSES)}")
        if self.photo_classes and (self.shards is not None or self.remote):
            raise ValueError("photo_classes generate and convert their own folders: give no shards")
        if self.photo_images is not None and self.photo_images < 2:
            raise ValueError(f"photo_images must be >= 2, got {self.photo_images}")
        if self.limit_images < 1:
            raise ValueError(f"limit_images must be >= 1, got {self.limit_images}")
        if self.epochs < 1 or self.warmup < 0 or self.batch_size < 1 or self.num_workers < 1 or self.rounds < 1:
            raise ValueError("epochs, rounds, batch_size and num_workers must be >= 1, warmup >= 0")
        remote_rows = tuple(name for name in _RUNNERS if _RUNNERS[name][1] == "remote")
        if self.remote and not set(remote_rows) & set(self.loaders):
            object.__setattr__(self, "loaders", tuple(self.loaders) + remote_rows)
        if not self.remote and set(remote_rows) & set(self.loaders):
            raise ValueError(f"loaders {sorted(remote_rows)} need a URL as --shards")
        unknown = set(self.loaders) - set(_RUNNERS)
        if unknown:
            raise ValueError(f"unknown loaders {sorted(unknown)}; choose from {sorted(_RUNNERS)}")
        dali_rows = sorted(set(self.loaders) & set(DALI_ROWS))
        if dali_rows and not dali_installed():
            raise ValueError(f"loaders {dali_rows} need NVIDIA DALI, which is not installed: {install_hint()}")


# loader -> (label, what it reads, the dataio.bench.image_baselines function that builds it)
_RUNNERS = {
    "standard": ("(a) standard: ImageFolder + PIL + DataLoader", "src", "make_standard"),
    # eval mode: torchvision's Resize(size / 0.875) + CenterCrop(size), against dataio's train=False
    "standard_eval": ("(a, eval) standard, Resize + CenterCrop", "src", "make_standard_eval"),
    "webdataset": ("(b) webdataset + PIL + DataLoader", "shard_list", "make_webdataset"),
    # the standard recipe's transform and DataLoader over dataio.ShardDataset: a script dataio's loader cannot run
    "shard_dataset": ("(h) dataio.ShardDataset + the standard transform + DataLoader", "folder", "make_shard_dataset"),
    "dali_cpu": ("(c) DALI CPU pipeline", "shard_list", "make_dali_cpu"),
    # the same images packed without restart markers (--restart-interval 0), so DALI also reads the
    # original bytes: dataio is compared with the faster of the two DALI rows
    "dali_cpu_plain": ("(c') DALI CPU pipeline, no restart markers", "plain_shard_list", "make_dali_cpu"),
    "dataio": ("(d) dataio.ImageLoader (turbo)", "folder", "make_dataio"),
    "dataio_eval": ("(d, eval) dataio.ImageLoader, train=False", "folder", "make_dataio_eval"),
    # the same with its per-sample checksums off: their end-to-end cost
    "dataio_unchecked": ("(d') dataio.ImageLoader, sample checksums off", "folder", "make_dataio_unchecked"),
    "dataio_dali_gpu": ("(e) dataio.ImageLoader (DALI GPU)", "folder", "make_dataio_dali_gpu"),
    # the same shards at a URL (--shards s3://...): range requests, and a second epoch from the local cache
    "dataio_remote": ("(f) dataio.ImageLoader, remote shards", "remote", "make_dataio_remote"),
    "dataio_remote_cached": ("(f') dataio.ImageLoader, remote shards, epochs from the cache", "remote",
                             "make_dataio_remote"),
    # the same shards under three names, equal weights, an epoch of one source's samples: the mixture's cost
    "dataio_mixture": ("(i) dataio.ImageLoader, a 3-source mixture of the same shards", "folder",
                       "make_dataio_mixture"),
    # num_workers="auto" against fixed thread counts (dataio_t1, dataio_t2, ...): the auto-tune check
    "dataio_auto": ("(g) dataio.ImageLoader, num_workers=auto", "folder", "make_dataio_auto"),
    **{f"dataio_t{n}": (f"(g{n}) dataio.ImageLoader, {n} thread{'s' * (n > 1)}", "folder", "make_dataio")
       for n in range(1, 9)},
}
DALI_ROWS = ("dali_cpu", "dali_cpu_plain", "dataio_dali_gpu")
MAX_TUNING_EPOCHS = 10


RATIO_GROUP = ("standard", "shard_dataset", "dataio", "dataio_mixture", "standard_eval", "dataio_eval")  # timed in turns
PHOTO_LOADERS = ("standard", "dataio", "standard_eval", "dataio_eval")  # the rows run on each photo class


def default_loaders() -> tuple[str, ...]:
    """The CPU loaders (DALI twice: dataio's packing and the original bytes; dataio with and without its
    sample checksums; the standard recipe and dataio in eval mode too), plus DALI GPU on a GPU machine; the DALI
    rows only where DALI is installed (an extra)."""
    base = ("standard", "webdataset", "shard_dataset", "dali_cpu", "dali_cpu_plain", "dataio", "dataio_unchecked",
            "standard_eval", "dataio_eval", "dataio_mixture")
    rows = base + ("dataio_dali_gpu",) if torch.cuda.is_available() else base
    return rows if dali_installed() else tuple(row for row in rows if row not in DALI_ROWS)


def _make(name: str, config: BenchImagesConfig, folder: Path,
          shard_lists: dict[str, list[Path]]) -> baselines.Epoch:
    _, reads, maker_name = _RUNNERS[name]
    source = {"src": config.src, "folder": folder, "remote": config.remote, **shard_lists}[reads]
    extra = {"samples": baselines.accepted_samples(folder)} if reads == "src" else {}
    if reads == "remote":
        extra = {"storage_options": config.storage_options, "cache": name == "dataio_remote_cached"}
    maker = getattr(baselines, maker_name)
    workers = int(name[len("dataio_t"):]) if name.startswith("dataio_t") else config.num_workers
    return maker(source, batch_size=config.batch_size, size=config.image_size, num_workers=workers, **extra)


def _threads_group(loaders: tuple[str, ...]) -> list[str]:
    """``dataio_auto`` and the fixed-thread rows, when both are asked for: measured together (below)."""
    group = [n for n in loaders if n == "dataio_auto" or n.startswith("dataio_t")]
    return group if "dataio_auto" in group and len(group) > 1 else []


def _sequence(loaders: tuple[str, ...]) -> list[list[str]]:
    """The loaders in the order they run, those measured together as one group: the threads group last, and
    the rows of ``RATIO_GROUP`` together, where the first of them stands. Their ratios are the checks:
    ``shard_dataset`` against ``standard`` (the same transform under the same DataLoader; run one after the
    other on the shared 2-core VM, the ratio moved from 0.57 to 1.13 between rounds, taken in turns it
    stayed within 1.02-1.21), dataio against the standard recipe in both modes, the mixture against dataio. A DataLoader's persistent
    workers and dataio's threads idle between their epochs, so they do not slow each other."""
    threads = _threads_group(loaders)
    together = [n for n in RATIO_GROUP if n in loaders]
    together = together if len(together) > 1 else []
    sequence = []
    for name in loaders:
        if name in threads or (name in together and name != together[0]):
            continue
        sequence.append(together if name in together else [name])
    return sequence + ([threads] if threads else [])


def _measure_interleaved(epochs: list[baselines.Epoch],
                         config: BenchImagesConfig) -> list[tuple[list[float], list[float], dict[str, Any] | None]]:
    """Warm each loader up, then time ``config.epochs`` epochs of each, one epoch of each in turn, and
    shut them down. Returns per loader the rates, the CPU microseconds per image of each epoch and, for
    dataio's loaders, the timed epochs' stage seconds and the threads (``loader.stats``).

    One loader alone is the sequential measurement. Several (``num_workers="auto"`` against fixed
    counts) take turns epoch by epoch, so that load from other processes on a shared machine, which
    moves by tens of percent within a minute on the 2-core VM, hits each of them alike; a loader not
    being iterated has its threads idle. ``num_workers="auto"`` warms up until its tuner has chosen (at
    most ``MAX_TUNING_EPOCHS``): its row is the throughput at the count it chose."""
    try:
        warm = []
        for epoch in epochs:
            count = 0
            tuner = getattr(epoch.stats, "tuner", None)
            while count < config.warmup or (tuner is not None and not tuner.done and count < MAX_TUNING_EPOCHS):
                epoch()
                count += 1
            warm.append(count)
        rates: list[list[float]] = [[] for _ in epochs]
        cpu: list[list[float]] = [[] for _ in epochs]
        for _ in range(config.epochs):
            for i, epoch in enumerate(epochs):
                rate, cpu_us = baselines.timed_with_cpu(epoch)
                rates[i].append(rate)
                cpu[i].append(cpu_us)
        out: list[tuple[list[float], list[float], dict[str, Any] | None]] = []
        for epoch, count, run_rates, run_cpu in zip(epochs, warm, rates, cpu, strict=True):
            if epoch.stats is None:
                out.append((run_rates, run_cpu, None))
                continue
            per_epoch = epoch.stats.stages.as_dict()
            timed = [per_epoch[str(e)] for e in range(count, count + config.epochs) if str(e) in per_epoch]
            seconds = {stage: sum(e.get(stage, {}).get("seconds", 0.0) for e in timed) for stage in STAGES}
            per_image = [{stage: e.get(stage, {}).get("seconds", 0.0) / max(1, e.get("decode", {}).get("calls", 0))
                          for stage in STAGES} for e in timed]  # each timed epoch's seconds per image
            clock = getattr(epoch.stats.stages, "clock", time.perf_counter)
            out.append((run_rates, run_cpu, {"seconds": seconds, "cpu_clock": clock is time.thread_time,
                                             "epochs": per_image,
                                             "threads": {**epoch.stats.threads, "warmup_epochs": count}}))
        return out
    finally:
        for epoch in epochs:
            epoch.close()


def _breakdown(stats: list[dict[str, Any]], images: int) -> dict[str, Any]:
    """Microseconds per image of each stage, summed over the runs; the threads of the last run."""
    total = {stage: sum(s["seconds"][stage] for s in stats) for stage in STAGES}
    epochs = [e for s in stats for e in s.get("epochs", [])]
    return {"us_per_image": {stage: 1e6 * total[stage] / max(1, images) for stage in STAGES},
            # the best epoch of each stage: set beside the best pass of its single-thread limit (stage_limits)
            "best_us_per_image": {stage: 1e6 * min((e[stage] for e in epochs), default=0.0) for stage in STAGES},
            "clock": "cpu" if all(s.get("cpu_clock") for s in stats) else "wall",
            "threads": stats[-1]["threads"], "threads_per_round": [s["threads"].get("chosen") for s in stats]}


def bench_images(config: BenchImagesConfig, log=print) -> dict[str, Any]:
    """Run every loader on one folder, print the table, write JSON and PNG; returns the result dict (the ratio
    rows on each photo class are ``photo_classes.bench_photo_classes``'s, over this module's ``bench_folder``)."""
    with tempfile.TemporaryDirectory(prefix="dataio-bench-") as tmp:
        result = bench_folder(config, config.src, config.shards, Path(tmp), log)
    log(render(result))
    paths = write_results(config.out, "images", result, {r["label"]: r["img_s"] for r in result["rows"]}, "images/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def bench_folder(config: BenchImagesConfig, src: Path, shards: Path | None, tmp: Path, log=print) -> dict[str, Any]:
    """``config.loaders`` over the images of ``src`` (its conversion ``shards``, made in ``tmp`` if None):
    the result dict that ``render`` prints."""
    folder = shards
    if folder is not None:
        shards_of_kind(folder, ("classification",), f"a `dataio convert images` of {src}")
    if folder is None:
        folder = tmp / "shards"
        log(f"converting {src} -> {folder}")
        convert_images(ConvertImagesConfig(src=src, out=folder, shard_size="32MB", progress=False))
    folder, manifest = read_manifest(folder)
    batches = -(-manifest.num_samples // config.batch_size)
    if batches < 2 * config.num_workers:  # a DataLoader worker makes whole batches: the others idle meanwhile
        log(f"note: {manifest.num_samples} images make {batches} batch(es) of {config.batch_size} for "
            f"{config.num_workers} workers: some idle; a --batch-size of at most "
            f"{max(1, manifest.num_samples // (2 * config.num_workers))} keeps them all busy")
    shard_lists = {"shard_list": [folder / s.file for s in manifest.shards]}
    if "dali_cpu_plain" in config.loaders:
        plain = tmp / "plain"
        log(f"converting {src} -> {plain} (no restart markers)")
        convert_images(ConvertImagesConfig(src=src, out=plain, shard_size="32MB", progress=False,
                                           prepare=ImagePrepareConfig(restart_interval=0)))
        shard_lists["plain_shard_list"] = [plain / s.file for s in read_manifest(plain)[1].shards]
    config = replace(config, src=src)
    samples = baselines.accepted_samples(folder)
    limit_loop = baselines.make_machine_limit(baselines.source_images(src, samples), size=config.image_size)
    packed = baselines.packed_images(folder)
    own_loop = baselines.make_machine_limit(packed, size=config.image_size, dataio_path=True)
    checksum_loop = baselines.make_checksum_loop(packed)
    modes = limit_modes(config.loaders)
    limit_rates, own_rates, checksum_rates = [], [], []
    limits: dict[bool, list[dict[str, Any]]] = {train: [] for train in modes}
    rates: dict[str, list[list[float]]] = {name: [] for name in config.loaders}  # per round, per epoch
    cpu: dict[str, list[float]] = {name: [] for name in config.loaders}  # CPU us per image, per epoch
    stage_stats: dict[str, list[dict[str, Any]]] = {name: [] for name in config.loaders}
    for round_index in range(config.rounds):
        suffix = f" (round {round_index + 1})" if config.rounds > 1 else ""
        bandwidth = stage_limits.copy_bandwidth() if modes else None  # one measurement for both modes' bound
        for train in modes:  # the stages' single-thread limits, once a round: the best round is kept
            limits[train].append(stage_limits.stage_limits(folder, size=config.image_size, train=train,
                                                           count=config.limit_images, batch_size=config.batch_size,
                                                           threads=config.num_workers, bandwidth=bandwidth))
        for group in _sequence(config.loaders):
            limit_rates.append(max(baselines.timed(limit_loop) for _ in range(2)))
            own_rates.append(max(baselines.timed(own_loop) for _ in range(2)))
            checksum_rates.append(max(baselines.timed(checksum_loop) for _ in range(2)))
            log(f"running {', '.join(_RUNNERS[n][0] for n in group)}"
                + (" (an epoch of each in turn)" if len(group) > 1 else "") + f"{suffix} ...")
            measured = _measure_interleaved([_make(n, config, folder, shard_lists) for n in group], config)
            for n, (run_rates, run_cpu, stats) in zip(group, measured, strict=True):
                rates[n].append(run_rates)
                cpu[n] += run_cpu
                if stats is not None:
                    stage_stats[n].append(stats)
    timed_images = manifest.num_samples * config.epochs * config.rounds
    rows: list[dict[str, Any]] = [
            {"loader": name, "label": _RUNNERS[name][0], "epochs": [r for run in runs for r in run],
             "round_img_s": [statistics.median(run) for run in runs],
             "img_s": statistics.median([r for run in runs for r in run]),
             "cpu_us_per_image": statistics.median(cpu[name]),
             **({"stages": _breakdown(stage_stats[name], timed_images)} if stage_stats[name] else {})}
            for name, runs in rates.items()]
    single, own_single = statistics.median(limit_rates), statistics.median(own_rates)
    cores = machine_description()["cores"] or 1
    limit = single * cores
    by_name = {r["loader"]: r for r in rows}
    merged = {train: stage_limits.merge(found) for train, found in limits.items()}
    for row in rows:
        base = by_name.get("standard_eval" if row["loader"] in EVAL_ROWS else "standard")
        row["per_core"] = row["img_s"] / cores
        row["vs_standard"] = row["img_s"] / base["img_s"] if base else None
        row["cpu_vs_standard"] = base["cpu_us_per_image"] / row["cpu_us_per_image"] if base else None
        row["of_limit"] = row["img_s"] / limit
        stages = row.get("stages")
        if stages and stages["clock"] == "cpu" and is_turbo(row["loader"]):
            row["stage_limits"] = stage_limits.compare(stages["best_us_per_image"],
                                                       merged[row["loader"] not in EVAL_ROWS],
                                                       min(cpu[row["loader"]]), row["loader"] != "dataio_unchecked")
    return {
        "benchmark": "images", "date": datetime.date.today().isoformat(),
        "machine": machine_description(),
        "load_average": load_average(),
        "num_images": manifest.num_samples,
        "mean_image_kb": statistics.fmean(len(data) for data in packed) / 1e3 if packed else None,
        "mean_megapixels": mean_megapixels(folder, manifest),
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()
                   if k not in ("storage_options", "remote")},  # credentials may be among them
        **({"remote": redact(config.remote)} if config.remote else {}),
        "machine_limit": {"single_thread_img_s": single, "cores": cores, "img_s": limit,
                          "dataio_single_thread_img_s": own_single},
        "stage_limits": {("train" if train else "eval"): found for train, found in merged.items()},
        "rows": rows,
        "sample_checksum": checksum_cost(by_name, own_single, statistics.median(checksum_rates)),
        "checks": checks(by_name, limit),
        "auto_threads": auto_check(by_name),
        "round_checks": [checks({r["loader"]: {"img_s": r["round_img_s"][i]} for r in rows}, limit)
                         for i in range(config.rounds)] if config.rounds > 1 else [],
    }
