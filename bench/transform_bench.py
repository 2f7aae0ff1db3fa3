"""What a Python per-sample ``transform=`` costs against ``ImageLoader``'s built-in path.

``python -m dataio.bench.transform_bench SHARDS OUT [--threads 2] [--epochs 3]``
reads the same shards (train crops at 224, uint8) with:

- ``builtin``: no hook (decode, crop, resize, flip in C, GIL released);
- ``identity``: ``transform=lambda image: image``: the price of calling
  Python once per sample on the decode threads (GIL taken, view built);
- ``jitter``: a ColorJitter-like brightness and contrast in torch ops
  (uint8 -> float -> uint8), what a script's own augmentation costs;
- ``jitter_seeded``: the same with a ``generator=`` parameter, so dataio
  seeds a generator per sample (reproducible for any thread count).

Configurations are interleaved epoch by epoch (the machine's load drifts)
after one warm-up epoch each; img/s is the median epoch. ``us_per_image``
is wall time per image; ``added_us`` its excess over ``builtin``;
``cpu_us_per_image`` the process's CPU time per image (steadier than wall
time on a shared machine; blind to waits for the GIL) and ``added_cpu_us``
its excess; ``transform_us`` the wall time inside the hook per sample, on
its thread (the ``transform`` stage). It also times the alternative to ``generator=``,
``torch.random.fork_rng`` + ``torch.manual_seed`` around each call, which
would moreover need one lock across the threads (the global generator is
process-wide).
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from dataio.bench.report import format_table, machine_description, write_results
from dataio.images.loader import ImageLoader
from dataio.images.sample_transform import SampleTransform


def jitter(image: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Brightness and contrast factors in [0.6, 1.4], as torchvision's ColorJitter(0.4, 0.4)."""
    factors = 0.6 + 0.8 * torch.rand(2, generator=generator)
    pixels = image.float()
    mean = pixels.mean()
    return ((pixels - mean) * factors[1] + mean * factors[0]).clamp_(0, 255).to(torch.uint8)


def jitter_seeded(image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return jitter(image, generator)


TRANSFORMS = {"builtin": None, "identity": lambda image: image, "jitter": jitter, "jitter_seeded": jitter_seeded}


def _epoch(loader: ImageLoader) -> tuple[float, int, float, float]:
    """(seconds, images, seconds inside the transform, CPU seconds of the process) of one pass."""
    start, cpu = time.perf_counter(), time.process_time()
    count = sum(len(labels) for _, labels in loader)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    hook = loader.stats.stages.seconds(loader.epoch - 1).get("transform", 0.0)
    return seconds, count, hook, cpu


def _seed_cost(repeats: int = 20000) -> dict[str, float]:
    """Microseconds per sample of seeding: a thread's generator vs fork_rng + manual_seed of the global one."""
    generator = torch.Generator()
    start = time.perf_counter()
    for i in range(repeats):
        generator.manual_seed(i)
    own = (time.perf_counter() - start) / repeats * 1e6
    start = time.perf_counter()
    for i in range(repeats // 10):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(i)
    forked = (time.perf_counter() - start) / (repeats // 10) * 1e6
    return {"generator_manual_seed_us": own, "fork_rng_manual_seed_us": forked}


def _gil_cost(repeats: int = 5000) -> dict[str, float]:
    """CPU microseconds per call on a (3, 4, 4) image: the interpreter and dispatcher part of each hook, which
    holds the GIL (its kernels on a real image release it), so what the decode threads serialise on."""
    slot = np.zeros((4, 4, 3), dtype=np.uint8)
    out = {}
    for name in ("identity", "jitter", "jitter_seeded"):
        hook = SampleTransform(TRANSFORMS[name])  # as the loader calls it: view, call, checks, write-back
        for _ in range(100):
            hook(slot, 0, str)
        start = time.thread_time()
        for _ in range(repeats):
            hook(slot, 0, str)
        out[f"{name}_gil_us"] = (time.thread_time() - start) / repeats * 1e6
    return out


def bench_transforms(shards: Path, out: Path, *, threads: int = 2, epochs: int = 3, batch_size: int = 64,
                     image_size: int = 224) -> dict:
    loaders = {name: ImageLoader(shards, batch_size=batch_size, image_size=image_size, train=True,
                                 num_workers=threads, transform=fn) for name, fn in TRANSFORMS.items()}
    for loader in loaders.values():  # warm-up: page cache, buffers, threads
        _epoch(loader)
    runs: dict[str, list[tuple[float, int, float, float]]] = {name: [] for name in loaders}
    for _ in range(epochs):
        for name, loader in loaders.items():
            runs[name].append(_epoch(loader))
    for loader in loaders.values():
        loader.close()
    rows = []
    for name, epochs_run in runs.items():
        rates = [count / seconds for seconds, count, _, _ in epochs_run]
        rate = statistics.median(rates)
        images = sum(c for _, c, _, _ in epochs_run)
        hook = sum(h for _, _, h, _ in epochs_run) / images * 1e6
        cpu = statistics.median(cpu / count * 1e6 for _, count, _, cpu in epochs_run)
        rows.append({"transform": name, "img_s": rate, "epochs_img_s": rates, "us_per_image": 1e6 / rate,
                     "cpu_us_per_image": cpu, "transform_us": hook if name != "builtin" else None})
    base, base_cpu = rows[0]["us_per_image"], rows[0]["cpu_us_per_image"]
    for row in rows:
        row["added_us"] = row["us_per_image"] - base
        row["added_cpu_us"] = row["cpu_us_per_image"] - base_cpu
    result = {"date": datetime.date.today().isoformat(), "machine": machine_description(),
              "config": {"shards": str(shards), "threads": threads, "epochs": epochs, "batch_size": batch_size,
                         "image_size": image_size, "images": runs["builtin"][0][1]},
              "rows": rows, "seeding": _seed_cost(), "gil": _gil_cost()}
    print(format_table(rows, [("transform", "transform", "s"), ("img_s", "img/s", ",.0f"),
                              ("us_per_image", "us/img (wall)", ",.0f"), ("added_us", "added", "+,.0f"),
                              ("cpu_us_per_image", "CPU us/img", ",.0f"), ("added_cpu_us", "added CPU", "+,.0f"),
                              ("transform_us", "us in hook (thread wall)", ",.0f")]))
    print(", ".join(f"{k}: {v:.2f}" for k, v in {**result["seeding"], **result["gil"]}.items()))
    write_results(out, "transform", result, {row["transform"]: row["img_s"] for row in rows}, "images/s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shards", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    bench_transforms(args.shards, args.out, threads=args.threads, epochs=args.epochs, batch_size=args.batch_size)


if __name__ == "__main__":
    main()
