"""Each stage of dataio's loader beside its own limit: the same work on one thread with no loader around it.

``dataio bench images`` times its dataio rows' stages in CPU seconds per image
(``StageTimes.clock = time.thread_time``). Here the same stages are timed the
same way, single-threaded, over the same packed files and the same kind of
crop boxes (RandomResizedCrop in training, the centre crop in eval):

- ``read``: the shard read (``ShardFiles.read``) and, where the loader checks
  them, the per-sample checksum (``sample_checksum``), as the loader's read;
- ``decode``: libjpeg-turbo's decode of the same pixels (the spliced region
  at the same DCT scale: ``decode_crop_into``'s own decode range), and within
  it ``entropy``: the Huffman decoding alone of the same restart intervals
  (``_jpeg_codec.check`` of the spliced bytes), the part that cropping columns
  does not shrink (None where a region is DCT-scaled: ``check`` stores every
  coefficient at full size, which a 1/8 decode does not, and measured 109-115%
  of the scaled decode of camera photos);
- ``resize``: the crop-resize into a batch slot (``decode_crop_into``'s resize
  range: the extension's ``resize_rgbx``, or PIL's resize and the packing);
- ``copy``: the loader's own copy stage beside the memory bound of writing an
  image's bytes at the machine's measured copy bandwidth (a single-thread
  ``memcpy`` of a batch-sized array); on the CPU the batch is filled in place
  by the resize, and ``pack`` is the RGBX-to-RGB packing alone where PIL
  resizes (``RESIZE_IN_C`` false).

The same loop also runs on the loader's thread count at once, with no loader
(``parallel``): two threads measured 4-8% more CPU per image in PIL's resize
than one on the 2-core VM, the cores' cost to each other (shared cache and
memory), which no loader could avoid; set beside it, what is left is the
loader's own overhead.

The best of ``passes`` passes is the limit: the least disturbed by other
processes on a shared machine; the loader's side is its best timed epoch, so
both sides are taken alike. A loader stage within 10% of its limit has nothing
left to gain but from the work itself; a row is at its limits when its process
CPU per image is within 10% of the whole single-thread path and every stage is
within 10% of its limit, or over it by less than 1% of that path (``MATERIAL``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from dataio.augment import crop_boxes
from dataio.bench.report import format_table
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table, sample_checksum
from dataio.images.config import ImageLoaderConfig
from dataio.images.shard_files import ShardFiles
from dataio.images.turbo_decode import RESIZE_IN_C, REGION_DECODE, _rgbx, decode_crop_into, region_of
from dataio.pipeline.stage_times import StageTimes

STAGES = ("read", "decode", "resize")  # the decode threads' stages, the ones with a limit here
WITHIN = 1.10  # "at its limit": within 10%
# A stage over its limit by less than this share of the whole single-thread path is immaterial: the read's
# ~20 us measured 4-6 us over its limit with two threads (the GIL taken back after each pread), 1% of a
# ~650 us image, a gain no change to the read could turn into throughput.
MATERIAL = 0.01


def copy_bandwidth(nbytes: int = 38 << 20, passes: int = 10) -> float:
    """Bytes per second one thread copies between two arrays of ``nbytes`` (a 256 x 224 x 224 x 3 batch)."""
    source = np.ones(nbytes, dtype=np.uint8)
    target = np.empty_like(source)
    np.copyto(target, source)  # pages touched before timing
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return nbytes / best


def stage_limits(shards_folder: Path, *, size: int, train: bool, count: int = 1000, passes: int = 3,
                 batch_size: int = 256, seed: int = 0, bandwidth: float | None = None,
                 threads: int = 1) -> dict[str, Any]:
    """CPU microseconds per image of each stage over the first ``count`` packed samples, on one thread.

    Each image goes to the next slot of a ``batch_size`` batch, as in the loader: the packing then writes to
    memory that is not in the cache, as the loader's does (one reused slot measured 14 us less per image).
    With ``threads`` > 1 the same loop also runs on that many threads at once, each over its share of the
    samples and its own batch, no loader around them (``parallel``): what the machine's cores cost each
    other (their shared caches and memory) apart from what the loader adds."""
    folder, manifest = read_manifest(shards_folder)
    table = read_sample_table(folder / manifest.sample_table)
    rng = np.random.default_rng(seed)
    ids = np.arange(min(count, len(table)))
    if train:  # read in a shuffled order, as the loader's training epochs do (in order: 5 us less per image)
        ids = rng.permutation(ids)
    widths, heights = table.width[ids], table.height[ids]
    defaults = ImageLoaderConfig()
    if train:
        boxes = crop_boxes.random_resized_crop_boxes(widths, heights, rng, defaults.crop_scale, defaults.crop_ratio)
        flips = crop_boxes.flips(len(ids), rng, defaults.hflip)
    else:
        boxes = crop_boxes.center_crop_boxes(widths, heights, defaults.val_crop_ratio)
        flips = np.zeros(len(ids), dtype=bool)
    files = ShardFiles(folder, manifest)
    work = _Work(files, table, ids.tolist(), boxes, flips, size, batch_size)
    try:
        single = _best_of(passes, lambda: work.run(1))
        parallel = _best_of(passes, lambda: work.run(threads)) if threads > 1 else None
        entropies = [work.entropy() for _ in range(passes)] if REGION_DECODE else [None]
        entropy = None if None in entropies else min(entropies)
    finally:
        files.close()
    bandwidth = bandwidth or copy_bandwidth()
    return {**single, "parallel": parallel, "threads": threads, "entropy_us": entropy,
            "pack_us": _pack_us(size) if REGION_DECODE and not RESIZE_IN_C else None,
            "copy_bound_us": 1e6 * size * size * 3 / bandwidth, "copy_gb_s": bandwidth / 1e9,
            "images": len(ids), "train": train}


class _Work:
    """The loader's per-image work without the loader: read, checksum, decode_crop_into a batch slot."""

    def __init__(self, files: ShardFiles, table: Any, ids: list[int], boxes: np.ndarray, flips: np.ndarray,
                 size: int, batch_size: int) -> None:
        self.files, self.table, self.ids, self.boxes, self.flips = files, table, ids, boxes, flips
        self.size, self.batch_size = size, batch_size

    def run(self, threads: int) -> dict[str, Any]:
        """One pass on ``threads`` threads (each over every ``threads``-th sample): us per image."""
        times = StageTimes(clock=time.thread_time)
        spent = [0.0] * threads
        start = threading.Barrier(threads)

        def one(part: int) -> None:
            mine = range(part, len(self.ids), threads)
            batch = np.zeros((max(1, min(self.batch_size, len(mine))), self.size, self.size, 3), dtype=np.uint8)
            batch.fill(1)  # its pages faulted in before timing: the loader's batches come from a pool (buffer_pool)
            lap = times.lap()
            start.wait()
            begin = time.thread_time()
            for n, i in enumerate(mine):
                sample = self.ids[i]
                with lap("read"):
                    data = self.files.read(int(self.table.shard[sample]), int(self.table.offset[sample]),
                                           int(self.table.size[sample]))
                with lap("checksum"):
                    sample_checksum(data)
                decode_crop_into(data, self.boxes[i], bool(self.flips[i]), batch[n % len(batch)], lap=lap)
            spent[part] = time.thread_time() - begin
            lap.flush()

        if threads == 1:
            one(0)
        else:
            workers = [threading.Thread(target=one, args=(part,)) for part in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        seconds = times.seconds()
        images = max(1, len(self.ids))
        return {"us_per_image": {stage: 1e6 * seconds.get(stage, 0.0) / images for stage in STAGES},
                "checksum_us": 1e6 * seconds.get("checksum", 0.0) / images, "path_us": 1e6 * sum(spent) / images}

    def entropy(self) -> float | None:
        """CPU us per image of the Huffman decoding alone of the restart intervals the decode reads: the
        spliced bytes of each sample's region (the whole file where it cannot be spliced), cut beforehand;
        None where a region is decoded at reduced size (module docstring)."""
        from dataio.formats.jpeg import _jpeg_codec  # lazy: the C extension is optional (REGION_DECODE)

        cut = []
        for i, sample in enumerate(self.ids):
            data = self.files.read(int(self.table.shard[sample]), int(self.table.offset[sample]),
                                   int(self.table.size[sample]))
            width, height = _jpeg_codec.header(data)
            scale, _, (left, top, right, bottom), _ = region_of(width, height, self.boxes[i], self.size, self.size)
            if scale > 1:
                return None
            # decode_region cuts (box - 2 px) * scale; splice cuts the full-size box - 2 px: the same intervals
            spliced = _jpeg_codec.splice(data, (left - 2) * scale + 2, (top - 2) * scale + 2,
                                         (right + 2) * scale - 2, (bottom + 2) * scale - 2)
            cut.append(spliced[0] if spliced is not None else data)
        start = time.thread_time()
        for data in cut:
            _jpeg_codec.check(data)
        return 1e6 * (time.thread_time() - start) / max(1, len(cut))


def _best_of(passes: int, run: Any) -> dict[str, Any]:
    """The best of ``passes`` runs, stage by stage (the path too)."""
    return _best_of_found([run() for _ in range(passes)])


def _pack_us(size: int, repeats: int = 200) -> float:
    """CPU microseconds of ``pack_rgbx`` alone: a resized size x size image into a batch slot."""
    from dataio.formats.jpeg import _jpeg_codec  # lazy: the C extension is optional (REGION_DECODE says it is built)

    image = Image.new("RGBX", (size, size), (10, 20, 30, 0))
    out = np.empty((size, size, 3), dtype=np.uint8)
    best = float("inf")
    for _ in range(3):
        start = time.thread_time()
        for _ in range(repeats):
            _jpeg_codec.pack_rgbx(_rgbx(image), out, size, size, False)
        best = min(best, time.thread_time() - start)
    return 1e6 * best / repeats


def merge(limits: list[dict[str, Any]]) -> dict[str, Any]:
    """Several measurements of the same limits (one per round): the best of each."""
    first = limits[0]
    packs = [m["pack_us"] for m in limits if m["pack_us"] is not None]
    bandwidth = max(m["copy_gb_s"] for m in limits)
    parallel = [m["parallel"] for m in limits if m.get("parallel")]
    entropy = [m["entropy_us"] for m in limits if m.get("entropy_us") is not None]
    return {**first, **_best_of_found(limits), "parallel": _best_of_found(parallel) if parallel else None,
            "entropy_us": min(entropy) if entropy else None,
            "pack_us": min(packs) if packs else None, "copy_gb_s": bandwidth,
            "copy_bound_us": first["copy_bound_us"] * first["copy_gb_s"] / bandwidth}


def _best_of_found(found: list[dict[str, Any]]) -> dict[str, Any]:
    return {"us_per_image": {stage: min(f["us_per_image"][stage] for f in found) for stage in STAGES},
            "checksum_us": min(f["checksum_us"] for f in found), "path_us": min(f["path_us"] for f in found)}


def compare(stages_us: dict[str, float], limits: dict[str, Any], cpu_us: float | None,
            checksums: bool = True) -> dict[str, Any]:
    """A loader row's stages (CPU us/image) against the limits; ``cpu_us``: the row's process CPU per image.
    The loader's read includes the per-sample checksum unless it runs without (``checksums=False``).

    ``at_limits``: against the single-thread limits. ``at_parallel_limits``: against the same loop on the
    loader's thread count without the loader (``limits["parallel"]``), where the cores' cost to each other
    is the machine's, not the loader's."""
    single = _against(stages_us, limits, cpu_us, checksums)
    parallel = _against(stages_us, limits["parallel"], cpu_us, checksums) if limits.get("parallel") else None
    return {**single, "parallel": parallel, "threads": limits.get("threads", 1),
            "at_parallel_limits": parallel["at_limits"] if parallel else None, "entropy_us": limits.get("entropy_us"),
            "copy_us": stages_us.get("copy"), "pack_us": limits["pack_us"], "copy_bound_us": limits["copy_bound_us"]}


def _against(stages_us: dict[str, float], limits: dict[str, Any], cpu_us: float | None,
             checksums: bool) -> dict[str, Any]:
    limit_us = dict(limits["us_per_image"])
    path = limits["path_us"]
    if checksums:
        limit_us["read"] += limits["checksum_us"]
    else:
        path -= limits["checksum_us"]
    ratios = {stage: stages_us[stage] / limit_us[stage] for stage in STAGES if limit_us[stage] > 0}
    excess = {stage: stages_us[stage] - limit_us[stage] for stage in ratios}
    over = {stage: r for stage, r in ratios.items() if r > WITHIN and excess[stage] > MATERIAL * path}
    slight = {stage: r for stage, r in ratios.items() if r > WITHIN and stage not in over}
    overall = cpu_us / path if cpu_us else None
    return {"loader_us": {stage: stages_us[stage] for stage in STAGES}, "limit_us": limit_us,
            "ratio": ratios, "cpu_us_per_image": cpu_us, "single_thread_path_us": path,
            "overall_ratio": overall, "over": over, "immaterial": slight,
            "at_limits": not over and (overall is None or overall <= WITHIN)}


def verdict(c: dict[str, Any]) -> str:
    """``at limits``, ``at N-thread limits`` or what is over, with stages over by an immaterial amount named."""
    slight = ", ".join(f"{s} {r - 1:+.0%}" for s, r in c.get("immaterial", {}).items())
    if c["at_limits"]:
        return "at limits" + (f" ({slight}: under 1% of an image)" if slight else "")
    parts = [f"{s} {r - 1:+.0%}" for s, r in c["over"].items()]
    if c["overall_ratio"] is not None and c["overall_ratio"] > WITHIN:
        parts.append(f"process {c['overall_ratio'] - 1:+.0%}")
    if c.get("at_parallel_limits"):
        return f"at {c['threads']}-thread limits (1-thread: {', '.join(parts)})"
    return "over: " + ", ".join(parts)


def render(rows: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The table: per dataio row, each stage as ``loader / limit (+x%)``, the entropy decoding's share of the
    decode limit, the copy against the bandwidth bound, and the row's CPU per image against the whole
    single-thread path."""
    if not rows:
        return []

    def cell(ours: float, limit: float) -> str:
        return f"{ours:,.0f} / {limit:,.0f} ({ours / limit - 1:+.0%})" if limit > 0 else f"{ours:,.0f} / -"

    table: list[dict[str, Any]] = []
    for label, c in rows:
        entry = {"label": label, **{s: cell(c["loader_us"][s], c["limit_us"][s]) for s in STAGES}}
        entropy, decode_limit = c.get("entropy_us"), c["limit_us"]["decode"]
        entry["entropy"] = f"{entropy:,.0f} ({entropy / decode_limit:.0%})" if entropy and decode_limit > 0 else None
        copy = f"{c['copy_us']:,.0f} / {c['copy_bound_us']:,.0f}" if c.get("copy_us") is not None else "-"
        entry["copy"] = copy + (f" (pack {c['pack_us']:,.0f})" if c["pack_us"] is not None else "")
        entry["all"] = (cell(c["cpu_us_per_image"], c["single_thread_path_us"])
                        if c["cpu_us_per_image"] else None)
        entry["verdict"] = verdict(c)
        table.append(entry)
        p = c.get("parallel")
        if p:  # the same against the loop on the loader's thread count, no loader
            table.append({"label": f"  vs {c['threads']} threads, no loader",
                          **{s: cell(p["loader_us"][s], p["limit_us"][s]) for s in STAGES},
                          "all": cell(p["cpu_us_per_image"], p["single_thread_path_us"]) if p["cpu_us_per_image"]
                          else None, "verdict": verdict(p)})
    columns = [("label", "dataio stages vs limits, CPU us/image", "s"), ("read", "read", "s"),
               ("decode", "decode", "s"), ("entropy", "of which Huffman", "s"), ("resize", "resize", "s"),
               ("copy", "copy / memory bound", "s"), ("all", "process CPU / path", "s"),
               ("verdict", "stages vs limits", "s")]
    return [format_table(table, columns),
            "(loader / limit: the loader's CPU us per image in the stage over all its threads, its best epoch / the "
            "same work on one thread, no loader, its best pass; of which Huffman: the entropy decoding alone of the "
            "same restart intervals, and its share of the decode limit (what cropping columns leaves as it is; not "
            "measured where the decode is DCT-scaled); copy: the loader's copy stage (on the CPU the resize fills the batch in place) / an image's "
            "bytes at the measured copy bandwidth; process CPU: all the loader's threads per image / the whole "
            "single-thread path, glue included; at limits: the process within 10% of the path, and each stage "
            "within 10% of its limit or over it by under 1% of the path; the row below: the same loop on the "
            "loader's thread count at once, no loader)"]
