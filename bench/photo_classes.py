"""``dataio bench images ROOT --photo-classes small,imagenet,camera``: the ratio rows on each class of photo size.

The gain of decoding only the crop's region, and of DCT scaling, depends on the
photos: the standard recipe decodes every pixel whatever the crop, so the
larger the photo against the 224 px crop, the more dataio saves. The classes
are those of ``formats.images.synthetic.PHOTO_CLASSES``: ``small`` (~50 KB,
~400 px), ``imagenet`` (~110 KB, ~500x375) and ``camera`` (5-12 MP, ~3 MB).
For each, ``ROOT/<class>`` holds the photos (used as it is if present, else
generated: ``DEFAULT_IMAGES``, or ``photo_images``), converted into a temporary
folder, and ``bench_folder`` runs the rows (``PHOTO_LOADERS``: the standard
recipe and dataio, in training and in eval mode, an epoch of each in turn). The
summary prints the six ratios, and for each whether dataio's stages are within
10% of the same work on one thread (``stage_limits``).
"""

from __future__ import annotations

import datetime
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dataio.bench.images import BenchImagesConfig, bench_folder
from dataio.bench.images_report import render
from dataio.bench.report import format_table, load_average, machine_description, write_results
from dataio.bench.huffman_floor import over_floor
from dataio.bench.stage_limits import verdict
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder

# camera photos are ~50x the bytes of the others; 256 make 4 batches of 64 (--batch-size 64: see bench_folder)
DEFAULT_IMAGES = {"small": 1024, "imagenet": 1024, "camera": 256}
MODES = (("train", "dataio", "standard"), ("eval", "dataio_eval", "standard_eval"))


def photo_folder(root: Path, photo_class: str, count: int, log=print) -> Path:
    """``root/photo_class``: as it is if it exists, else ``count`` generated photos of the class (written
    beside it first and renamed, so an interrupted run leaves no half folder)."""
    folder = root / photo_class
    if folder.exists():
        return folder
    classes = 10 if count >= 20 else 2
    partial = root / f".{photo_class}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    log(f"generating {classes} x {math.ceil(count / classes)} {photo_class} photos in {folder}")
    write_image_folder(partial, SyntheticImagesConfig(num_classes=classes, images_per_class=math.ceil(count / classes),
                                                      photo_class=photo_class))
    partial.rename(folder)
    return folder


def bench_photo_classes(config: BenchImagesConfig, log=print) -> dict[str, Any]:
    """``bench_folder`` on each photo class, its table printed as it ends; then the summary, written as
    ``images-classes.json`` (and ``.png``: the ratios)."""
    config.src.mkdir(parents=True, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="dataio-bench-") as tmp:
        for photo_class in config.photo_classes:
            count = config.photo_images or DEFAULT_IMAGES[photo_class]
            src = photo_folder(config.src, photo_class, count, log)
            work = Path(tmp) / photo_class
            work.mkdir()
            log(f"photo class {photo_class}: {src}")
            results[photo_class] = bench_folder(config, src, None, work, log)
            log(render(results[photo_class]))
    combined = {"benchmark": "images-photo-classes", "date": datetime.date.today().isoformat(),
                "machine": machine_description(), "load_average": load_average(),
                "summary": summarize(results), "classes": results}
    log(render_summary(combined))
    bars = {f"{c} {mode}": entry[mode]["vs_standard"] for c, entry in combined["summary"].items()
            for mode, *_ in MODES if entry.get(mode, {}).get("vs_standard") is not None}
    paths = write_results(config.out, "images-classes", combined, bars, "x the standard recipe (images/s)", ".2f")
    log("wrote " + ", ".join(str(p) for p in paths))
    return combined


def summarize(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per class and mode: dataio's ratio to the standard recipe (rates and CPU per image), per round, and where
    dataio's stages stand against their limits (``stage_limits``): ``at limits`` (within 10% of the same work on
    one thread, in all and stage by stage), ``at N-thread limits`` (within 10% of the same work on its N threads
    without the loader: what the cores cost each other), or what is over."""
    out = {}
    for photo_class, result in results.items():
        rows = {r["loader"]: r for r in result["rows"]}
        entry: dict[str, Any] = {"images": result["num_images"], "mean_image_kb": result.get("mean_image_kb"),
                                 "mean_megapixels": result.get("mean_megapixels")}
        for mode, ours, theirs in MODES:
            if ours not in rows or theirs not in rows:
                continue
            limits = rows[ours].get("stage_limits")
            entry[mode] = {"vs_standard": rows[ours]["vs_standard"], "cpu_vs_standard": rows[ours]["cpu_vs_standard"],
                           "rounds": [a / b for a, b in zip(rows[ours]["round_img_s"], rows[theirs]["round_img_s"],
                                                            strict=True)],
                           "img_s": rows[ours]["img_s"], "standard_img_s": rows[theirs]["img_s"],
                           "stages_at_limits": bool(limits and limits["at_limits"]),
                           "stages_at_parallel_limits": bool(limits and limits["at_parallel_limits"]),
                           "stages": verdict(limits) if limits else None,
                           "over_huffman": over_floor(limits) if limits else None}
        out[photo_class] = entry
    return out


def render_summary(combined: dict[str, Any]) -> str:
    """The six ratios (train and eval on each class), with their CPU-time ratios and where the stages stand."""
    m, load = combined["machine"], combined.get("load_average")
    table = []
    for photo_class, entry in combined["summary"].items():
        row: dict[str, Any] = {"class": photo_class, "images": entry["images"], "kb": entry["mean_image_kb"],
                               "mp": entry["mean_megapixels"]}
        for mode, *_ in MODES:
            found = entry.get(mode)
            if found:
                rounds = ", ".join(f"{r:.2f}" for r in found["rounds"])
                row[mode] = f"{found['vs_standard']:.2f}x ({found['cpu_vs_standard']:.2f}x CPU; rounds {rounds})"
                row[f"{mode}_stages"] = found["stages"]
                floor = found.get("over_huffman")
                row[f"{mode}_floor"] = f"{floor['decode_resize']:.2f}x" if floor else "-"
        table.append(row)
    columns = [("class", "photo class", "s"), ("images", "images", "d"), ("kb", "KB/image", ",.0f"),
               ("mp", "MP", ".2f"), ("train", "train: dataio / standard", "s"),
               ("train_stages", "dataio's stages", "s"), ("train_floor", "decode+resize / Huffman", "s"),
               ("eval", "eval: dataio / standard", "s"), ("eval_stages", "dataio's stages", "s"),
               ("eval_floor", "decode+resize / Huffman", "s")]
    head = (f"dataio against the standard recipe by photo class, compared on this machine ({m['cpu']}"
            + (f", {m['cpu_class']}, crop-resize tier {m['cpu_tier']}" if "cpu_tier" in m else "")
            + f", {m['cores']} cores, GPU: {m['gpu'] or 'none'}), {combined['date']}"
            + (f"; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}" if load else "")
            + ": images/s of dataio over the standard recipe, in training and in eval mode")
    return "\n".join([head, format_table(table, columns),
                      "(CPU: the ratio of CPU time per image, which moves less with other processes' load; dataio's "
                      "stages: at limits when within 10% of the same work on one thread, in all and stage by stage (a "
                      "stage over by under 1% of an image aside); at N-thread limits: within 10% of the same work on "
                      "its N threads without the loader: the stage tables above)"])
