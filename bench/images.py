"""``dataio bench images SRC``: loader images/s against what users run today.

All loaders read the same images on the same machine in one run: the source
folder (standard recipe) or its shards (the others), full path to a batch of
uint8 crops. Loaders run one at a time (co-resident DataLoader workers and
DALI's prefetching threads were measured to slow each other by ~25%): each is
built, warmed up (``warmup`` epochs), timed over ``epochs`` epochs and shut
down before the next. The exceptions: ``dataio_auto`` and the fixed-thread
rows ``dataio_t<n>`` are compared with each other, and so are ``shard_dataset``
and ``standard`` (the same transform and DataLoader), so each set is built together
and timed one epoch of each in turn (their threads idle while another runs). The machine-limit loop (bare single-thread full decode +
crop, times the cores) is timed again before each loader, so a shared
machine's drift shows in the limit too. Medians are reported, with the ratio
to the standard recipe and the share of the machine's limit. dataio decodes
only the crop's region, so it can pass that limit; the same loop over
dataio's own per-image path (over the packed files, restart intervals
included) gives its parallel efficiency.
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from dataio.bench import image_baselines as baselines
from dataio.bench.report import format_table, machine_description, write_results
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.image_prepare import ImagePrepareConfig
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.remote.storage import redact
from dataio.images.dali_install import dali_installed, install_hint

# The ratios printed under the table: (this row, against that), in the words the report prints.
COMPARISONS = {
    "vs_standard": ("(d) dataio.ImageLoader", "(a) ImageFolder + PIL + DataLoader"),
    "vs_dali_cpu": ("(d) dataio.ImageLoader", "the faster DALI CPU pipeline, (c) or (c')"),
    "of_machine_limit": ("(d) dataio.ImageLoader", "the machine limit (full decode + crop-resize x cores)"),
    "shard_dataset_vs_standard": ("(h) dataio.ShardDataset", "(a), under the same transform and DataLoader"),
    "dali_gpu_vs_turbo": ("(e) dataio.ImageLoader, DALI on the GPU", "(d) dataio.ImageLoader, CPU threads"),
    "mixture_vs_single": ("(i) dataio.ImageLoader, a mixture of 3 sources", "(d), one source, over the same images"),
}


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
    loaders: tuple[str, ...] = field(default_factory=lambda: default_loaders())
    remote: str | None = None  # the same shards at an fsspec URL: its rows are timed beside the local ones
    storage_options: dict | None = None  # for ``remote``; never printed or written to the results

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", Path(self.src))
        object.__setattr__(self, "out", Path(self.out))
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
    "webdataset": ("(b) webdataset + PIL + DataLoader", "shard_list", "make_webdataset"),
    # the standard recipe's transform and DataLoader over dataio.ShardDataset: a script dataio's loader cannot run
    "shard_dataset": ("(h) dataio.ShardDataset + the standard transform + DataLoader", "folder", "make_shard_dataset"),
    "dali_cpu": ("(c) DALI CPU pipeline", "shard_list", "make_dali_cpu"),
    # the same images packed without restart markers (--restart-interval 0), so DALI also reads the
    # original bytes: dataio is compared with the faster of the two DALI rows
    "dali_cpu_plain": ("(c') DALI CPU pipeline, no restart markers", "plain_shard_list", "make_dali_cpu"),
    "dataio": ("(d) dataio.ImageLoader (turbo)", "folder", "make_dataio"),
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
STAGES = ("read", "decode", "resize", "plan", "decode_wait", "copy", "augment", "wait")


def default_loaders() -> tuple[str, ...]:
    """The CPU loaders (DALI twice: dataio's packing and the original bytes; dataio with and without its
    sample checksums), plus DALI GPU on a GPU machine; the DALI rows only where DALI is installed (an extra)."""
    base = ("standard", "webdataset", "shard_dataset", "dali_cpu", "dali_cpu_plain", "dataio", "dataio_unchecked",
            "dataio_mixture")
    rows = base + ("dataio_dali_gpu",) if torch.cuda.is_available() else base
    return rows if dali_installed() else tuple(row for row in rows if row not in DALI_ROWS)


def _make(name: str, config: BenchImagesConfig, folder: Path,
          shard_lists: dict[str, list[Path]]) -> baselines.Epoch:
    _, reads, maker_name = _RUNNERS[name]
    source = {"src": config.src, "folder": folder, "remote": config.remote, **shard_lists}[reads]
    extra = {"samples": baselines.accepted_samples(folder)} if name == "standard" else {}
    if reads == "remote":
        extra = {"storage_options": config.storage_options, "cache": name == "dataio_remote_cached"}
    maker = getattr(baselines, maker_name)
    workers = int(name[len("dataio_t"):]) if name.startswith("dataio_t") else config.num_workers
    return maker(source, batch_size=config.batch_size, size=config.image_size, num_workers=workers, **extra)


def _threads_group(loaders: tuple[str, ...]) -> list[str]:
    """``dataio_auto`` and the fixed-thread rows, when both are asked for: measured together (below)."""
    group = [n for n in loaders if n == "dataio_auto" or n.startswith("dataio_t")]
    return group if "dataio_auto" in group and len(group) > 1 else []


# Rows measured in turns with the row whose ratio checks them: the same transform under the same DataLoader
# (shard_dataset), the same images through one source and through a mixture (dataio_mixture).
PAIRS = (("standard", "shard_dataset"), ("dataio", "dataio_mixture"))


def _sequence(loaders: tuple[str, ...]) -> list[list[str]]:
    """The loaders in the order they run, those measured together as one group: the threads group last,
    and each of ``PAIRS`` whose rows are both asked for, in turns (run one after the other on the shared 2-core
    VM, the ratio of shard_dataset to standard moved from 0.57 to 1.13 between rounds, taken in turns it stayed
    within 1.02-1.21). A DataLoader's persistent workers idle between its epochs, and so do dataio's threads, so
    the two of a pair do not slow each other."""
    threads = _threads_group(loaders)
    pairs = [list(pair) for pair in PAIRS if set(pair) <= set(loaders)]
    sequence: list[list[str]] = []
    for name in loaders:
        pair = next((p for p in pairs if name in p), None)
        if name in threads or (pair is not None and name != pair[0]):
            continue
        sequence.append(pair if pair is not None else [name])
    return sequence + ([threads] if threads else [])


def _measure_interleaved(epochs: list[baselines.Epoch],
                         config: BenchImagesConfig) -> list[tuple[list[float], dict[str, Any] | None]]:
    """Warm each loader up, then time ``config.epochs`` epochs of each, one epoch of each in turn, and
    shut them down. Returns per loader the rates and, for dataio's loaders, the timed epochs' stage
    seconds and the threads (``loader.stats``).

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
        for _ in range(config.epochs):
            for i, epoch in enumerate(epochs):
                rates[i].append(baselines.timed(epoch))
        out = []
        for epoch, count, run_rates in zip(epochs, warm, rates):
            if epoch.stats is None:
                out.append((run_rates, None))
                continue
            per_epoch = epoch.stats.stages.as_dict()
            timed = [per_epoch[str(e)] for e in range(count, count + config.epochs) if str(e) in per_epoch]
            seconds = {stage: sum(e.get(stage, {}).get("seconds", 0.0) for e in timed) for stage in STAGES}
            out.append((run_rates, {"seconds": seconds, "threads": {**epoch.stats.threads, "warmup_epochs": count}}))
        return out
    finally:
        for epoch in epochs:
            epoch.close()


def _breakdown(stats: list[dict[str, Any]], images: int) -> dict[str, Any]:
    """Microseconds per image of each stage, summed over the runs; the threads of the last run."""
    total = {stage: sum(s["seconds"][stage] for s in stats) for stage in STAGES}
    return {"us_per_image": {stage: 1e6 * total[stage] / max(1, images) for stage in STAGES},
            "threads": stats[-1]["threads"], "threads_per_round": [s["threads"].get("chosen") for s in stats]}


def bench_images(config: BenchImagesConfig, log=print) -> dict[str, Any]:
    """Run every loader, print the table, write JSON and PNG; returns the result dict."""
    with tempfile.TemporaryDirectory(prefix="dataio-bench-") as tmp:
        folder = config.shards
        if folder is None:
            folder = Path(tmp) / "shards"
            log(f"converting {config.src} -> {folder}")
            convert_images(ConvertImagesConfig(src=config.src, out=folder, shard_size="32MB", progress=False))
        folder, manifest = read_manifest(folder)
        shard_lists = {"shard_list": [folder / s.file for s in manifest.shards]}
        if "dali_cpu_plain" in config.loaders:
            plain = Path(tmp) / "plain"
            log(f"converting {config.src} -> {plain} (no restart markers)")
            convert_images(ConvertImagesConfig(src=config.src, out=plain, shard_size="32MB", progress=False,
                                               prepare=ImagePrepareConfig(restart_interval=0)))
            shard_lists["plain_shard_list"] = [plain / s.file for s in read_manifest(plain)[1].shards]
        samples = baselines.accepted_samples(folder)
        limit_loop = baselines.make_machine_limit(baselines.source_images(config.src, samples),
                                                  size=config.image_size)
        packed = baselines.packed_images(folder)
        own_loop = baselines.make_machine_limit(packed, size=config.image_size, dataio_path=True)
        checksum_loop = baselines.make_checksum_loop(packed)
        limit_rates, own_rates, checksum_rates = [], [], []
        rates: dict[str, list[list[float]]] = {name: [] for name in config.loaders}  # per round, per epoch
        stage_stats: dict[str, list[dict[str, Any]]] = {name: [] for name in config.loaders}
        for round_index in range(config.rounds):
            suffix = f" (round {round_index + 1})" if config.rounds > 1 else ""
            for group in _sequence(config.loaders):
                limit_rates.append(max(baselines.timed(limit_loop) for _ in range(2)))
                own_rates.append(max(baselines.timed(own_loop) for _ in range(2)))
                checksum_rates.append(max(baselines.timed(checksum_loop) for _ in range(2)))
                log(f"running {', '.join(_RUNNERS[n][0] for n in group)}"
                    + (" (an epoch of each in turn)" if len(group) > 1 else "") + f"{suffix} ...")
                measured = _measure_interleaved([_make(n, config, folder, shard_lists) for n in group], config)
                for n, (run_rates, stats) in zip(group, measured):
                    rates[n].append(run_rates)
                    if stats is not None:
                        stage_stats[n].append(stats)
        timed_images = manifest.num_samples * config.epochs * config.rounds
        rows = [{"loader": name, "label": _RUNNERS[name][0], "epochs": [r for run in runs for r in run],
                 "round_img_s": [statistics.median(run) for run in runs],
                 "img_s": statistics.median([r for run in runs for r in run]),
                 **({"stages": _breakdown(stage_stats[name], timed_images)} if stage_stats[name] else {})}
                for name, runs in rates.items()]
        single, own_single = statistics.median(limit_rates), statistics.median(own_rates)
    cores = machine_description()["cores"] or 1
    limit = single * cores
    by_name = {r["loader"]: r for r in rows}
    base = by_name.get("standard", {}).get("img_s")
    for row in rows:
        row["per_core"] = row["img_s"] / cores
        row["vs_standard"] = row["img_s"] / base if base else None
        row["of_limit"] = row["img_s"] / limit
    result = {
        "benchmark": "images",
        "date": datetime.date.today().isoformat(),
        "machine": machine_description(),
        "num_images": manifest.num_samples,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()
                   if k not in ("storage_options", "remote")},  # credentials may be among them
        **({"remote": redact(config.remote)} if config.remote else {}),
        "machine_limit": {"single_thread_img_s": single, "cores": cores, "img_s": limit,
                          "dataio_single_thread_img_s": own_single},
        "rows": rows,
        "sample_checksum": _checksum_cost(by_name, own_single, statistics.median(checksum_rates)),
        "checks": _checks(by_name, limit),
        "auto_threads": _auto_check(by_name),
        "round_checks": [_checks({r["loader"]: {"img_s": r["round_img_s"][i]} for r in rows}, limit)
                         for i in range(config.rounds)] if config.rounds > 1 else [],
    }
    log(render(result))
    paths = write_results(config.out, "images", result, {r["label"]: r["img_s"] for r in rows}, "images/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def _checksum_cost(by_name: dict[str, dict], own_single: float, checksum_single: float) -> dict[str, Any]:
    """What the per-sample checksums cost: their share of dataio's single-thread per-image work (a
    CPU-time measure, steady on a shared machine), and the end-to-end throughput of the loader with
    them against without them (noisier: two timed runs)."""
    checked, unchecked = (by_name.get(n, {}).get("img_s") for n in ("dataio", "dataio_unchecked"))
    return {"us_per_image": 1e6 / checksum_single,
            "share_of_per_image_work": own_single / checksum_single,
            "throughput_cost": 1 - checked / unchecked if checked and unchecked else None}


def _auto_check(by_name: dict[str, dict]) -> dict[str, Any] | None:
    """auto's throughput against the best fixed-thread dataio row within auto's budget (per round too),
    and against the best fixed row of all (counts past the budget oversubscribe the cores auto was given)."""
    auto = by_name.get("dataio_auto")
    fixed = {n: r for n, r in by_name.items() if n.startswith("dataio_t")}
    if auto is None or not fixed:
        return None
    budget = auto.get("stages", {}).get("threads", {}).get("max_threads") or max(int(n[8:]) for n in fixed)
    within = {n: r for n, r in fixed.items() if int(n[len("dataio_t"):]) <= budget} or fixed
    best = max(within, key=lambda n: within[n]["img_s"])
    overall = max(fixed, key=lambda n: fixed[n]["img_s"])
    ratio = auto["img_s"] / within[best]["img_s"]
    rounds = [a / max(f["round_img_s"][i] for f in within.values()) for i, a in enumerate(auto["round_img_s"])]
    return {"budget_threads": budget, "best_fixed": best, "best_fixed_img_s": within[best]["img_s"],
            "auto_img_s": auto["img_s"], "ratio": ratio, "round_ratios": rounds,
            "chosen_threads": auto.get("stages", {}).get("threads_per_round"),
            "best_fixed_overall": overall, "ratio_to_best_overall": auto["img_s"] / fixed[overall]["img_s"]}


def _checks(by_name: dict[str, dict], limit: float) -> dict[str, dict[str, Any]]:
    ours = by_name.get("dataio", {}).get("img_s")
    dali = max((by_name[n]["img_s"] for n in ("dali_cpu", "dali_cpu_plain") if n in by_name), default=None)
    measured = {
        "vs_standard": ours / by_name["standard"]["img_s"] if ours and "standard" in by_name else None,
        "vs_dali_cpu": ours / dali if ours and dali else None,
        "of_machine_limit": ours / limit if ours else None,
    }
    dataset = by_name.get("shard_dataset", {}).get("img_s")
    if dataset and "standard" in by_name:  # the same transform and DataLoader: it must still beat (a)
        measured["shard_dataset_vs_standard"] = dataset / by_name["standard"]["img_s"]
    mixture = by_name.get("dataio_mixture", {}).get("img_s")
    if mixture and ours:  # the same images through three sources and through one, taken in turns
        measured["mixture_vs_single"] = mixture / ours
    gpu = by_name.get("dataio_dali_gpu", {}).get("img_s")
    if gpu:
        measured["dali_gpu_vs_turbo"] = gpu / ours if ours else None
    return {k: {"value": v, "row": COMPARISONS[k][0], "against": COMPARISONS[k][1]} for k, v in measured.items()}


def render_stages(rows: list[dict[str, Any]]) -> list[str]:
    """The per-stage table of dataio's rows: microseconds per image (read, decode and resize are summed over
    the decode threads; the others are on the loader's thread; wait is the consumer's time in next())."""
    staged = [r for r in rows if "stages" in r]
    if not staged:
        return []
    table = [{"label": r["label"], **r["stages"]["us_per_image"]} for r in staged]
    columns = [("label", "dataio stages, us/image", "s")] + [(stage, stage, ",.0f") for stage in STAGES]
    return [format_table(table, columns),
            "(read, decode, resize: thread-seconds over the decode threads; the rest on the loader's thread)"]


def render(result: dict[str, Any]) -> str:
    """The printed report: machine line, table, limit, and the ratios of dataio's rows to the others."""
    m = result["machine"]
    cfg = result["config"]
    head = (f"dataio bench images, {result['date']}: {m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}; "
            f"{result['num_images']} images, batch {cfg['batch_size']}, {cfg['image_size']}px train crops, "
            f"{cfg['num_workers']} workers, median of {cfg['epochs']} warm epochs"
            + (f" x {cfg['rounds']} rounds" if cfg.get("rounds", 1) > 1 else ""))
    table = format_table(result["rows"], [("label", "loader", "s"), ("img_s", "img/s", ",.0f"),
                                          ("per_core", "img/s/core", ",.0f"), ("vs_standard", "vs (a)", ".2f"),
                                          ("of_limit", "of limit", ".0%")])
    lim = result["machine_limit"]
    lines = [head, table, f"machine limit: {lim['single_thread_img_s']:,.0f} img/s single-thread x {lim['cores']} "
             f"cores = {lim['img_s']:,.0f} img/s (full decode + crop-resize)"]
    own = lim.get("dataio_single_thread_img_s")
    ours = next((r["img_s"] for r in result["rows"] if r["loader"] == "dataio"), None)
    if own and ours:
        share = ours / (own * lim["cores"])
        lines.append(f"dataio's own path over the packed files (spliced region decode + crop-resize): {own:,.0f} img/s "
                     f"single-thread; the loader runs at {share:.0%} of that x {lim['cores']} cores")
    checksum = result.get("sample_checksum")
    if checksum:
        cost = checksum["throughput_cost"]
        lines.append(f"sample checksums (xxh3-64, checked on every read): {checksum['us_per_image']:.1f} us/image, "
                     f"{checksum['share_of_per_image_work']:.1%} of dataio's per-image work"
                     + (f"; throughput with them vs without: {-cost:+.1%}" if cost is not None else ""))
    lines += render_stages(result["rows"])
    auto = result.get("auto_threads")
    if auto:
        lines.append(f"num_workers=auto: {auto['auto_img_s']:,.0f} img/s, chose {auto['chosen_threads']} threads "
                     f"(budget {auto['budget_threads']}); best fixed within the budget {auto['best_fixed']} "
                     f"{auto['best_fixed_img_s']:,.0f} img/s: auto ran at {auto['ratio']:.3f}x its rate; rounds: "
                     + ", ".join(f"{r:.3f}" for r in auto["round_ratios"])
                     + (f"; against {auto['best_fixed_overall']}, past the budget: {auto['ratio_to_best_overall']:.3f}"
                        if auto["best_fixed_overall"] != auto["best_fixed"] else ""))
    rounds = result.get("round_checks") or []
    compared = [(name, check) for name, check in result["checks"].items() if check["value"] is not None]
    if compared:
        lines.append(f"compared on this machine ({m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}), "
                     "images/s of one row over the other:")
    for name, check in compared:
        row, against = COMPARISONS[name]
        per_round = [r[name]["value"] for r in rounds if r.get(name, {}).get("value") is not None]
        spread = f" (rounds: {', '.join(f'{v:.2f}' for v in per_round)})" if per_round else ""
        lines.append(f"  {row} vs {against}: {check['value']:.2f}x{spread}")
    return "\n".join(lines)
