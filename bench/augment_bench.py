"""``dataio bench augment``: batched device augmentation against kornia and a per-image PIL loop.

All contenders get the same batch (default 256 x 3 x 224 x 224 of photo-like
images) on the same device. RandAugment and the chain: dataio takes the uint8
batch and returns uint8 (normalised floats for the chain), conversions
included; kornia is given the batch already converted to float in [0, 1],
which it requires (its conversion is not timed). MixUp and CutMix: both take
that float batch, as they would after RandAugment in a chain. The PIL loop runs
RandAugment image by image in one thread, as a Dataset transform inside one
DataLoader worker does; its per-core rate is reported beside it. Times are
medians of ``repeats`` after a warm-up, with CUDA synchronised around each. The
ratio to the PIL loop is the median of per-pair ratios, each pair being one
dataio batch and one pass of the PIL loop timed back to back (``paired_ratios``),
so machine drift hits both sides. On the CPU, dataio's RandAugment runs its C
kernel (``dataio.augment.cpu_kernel``); on a GPU, batched torch ops.
"""

from __future__ import annotations

import datetime
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from PIL import Image

from dataio.augment import DeviceAugment, MixConfig, MixUpCutMix, Normalize, RandAugment, RandAugmentConfig
from dataio.bench.pil_randaugment import PilRandAugment
from dataio.formats.images.synthetic import synthetic_image
from dataio.images.config import IMAGENET_MEAN, IMAGENET_STD

from dataio.bench.report import format_table, machine_description, write_results

# The ratios printed under the table: (what dataio ran, against what), in the words the report prints.
COMPARISONS = {
    "randaugment_vs_kornia": ("RandAugment(2, 9)", "kornia.augmentation"),
    "randaugment_vs_pil_loop": ("RandAugment(2, 9)", "the per-image PIL loop in one thread, as one DataLoader worker "
                                "runs it (median of the back-to-back pairs)"),
    "mixup_vs_kornia": ("MixUp", "kornia.augmentation"),
    "cutmix_vs_kornia": ("CutMix", "kornia.augmentation"),
}


@dataclass(frozen=True, kw_only=True)
class BenchAugmentConfig:
    """Options of the augmentation benchmark."""

    out: Path = Path("bench/results")
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    batch_size: int = 256
    image_size: int = 224
    repeats: int = 7
    pil_images: int = 256  # images timed through the per-image PIL loop

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.batch_size < 2 or self.image_size < 32 or self.repeats < 1 or self.pil_images < 1:
            raise ValueError("batch_size >= 2, image_size >= 32, repeats >= 1, pil_images >= 1")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} requested but CUDA is not available")


def photo_batch(n: int, size: int) -> np.ndarray:
    """(n, size, size, 3) uint8 photo-like images."""
    rng = np.random.default_rng(0)
    return np.stack([np.asarray(synthetic_image(i % 10, rng).convert("RGB").resize((size, size))) for i in range(n)])


def timed(fn: Callable[[], Any], device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _contenders(config: BenchAugmentConfig, pixels: np.ndarray) -> dict[str, dict[str, Callable[[], Any]]]:
    import kornia.augmentation as K  # deliberately lazy: kornia's import costs about a second

    device = torch.device(config.device)
    batch = torch.from_numpy(pixels).to(device).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    unit = batch.float().div(255)
    labels = torch.randint(0, 1000, (len(batch),), device=device)
    ra = RandAugment(RandAugmentConfig(num_ops=2, magnitude=9))
    mixup = MixUpCutMix(MixConfig(num_classes=1000, cutmix_alpha=0.0))
    cutmix = MixUpCutMix(MixConfig(num_classes=1000, mixup_alpha=0.0))
    chain = DeviceAugment(randaugment=RandAugmentConfig(num_ops=2, magnitude=9), mix=MixConfig(num_classes=1000),
                          normalize=Normalize(IMAGENET_MEAN, IMAGENET_STD))
    k_ra = K.auto.RandAugment(n=2, m=9)
    k_mixup, k_cutmix = K.RandomMixUpV2(p=1.0), K.RandomCutMixV2(p=1.0, use_correct_lambda=True)
    k_norm = K.Normalize(mean=torch.tensor(IMAGENET_MEAN), std=torch.tensor(IMAGENET_STD))
    k_chain = lambda: k_norm(k_mixup(k_ra(unit), labels)[0])  # noqa: E731
    return {
        "randaugment": {"dataio": lambda: ra(batch), "kornia": lambda: k_ra(unit)},
        "mixup": {"dataio": lambda: mixup(unit, labels), "kornia": lambda: k_mixup(unit, labels)},
        "cutmix": {"dataio": lambda: cutmix(unit, labels), "kornia": lambda: k_cutmix(unit, labels)},
        "train chain (RA + MixUp/CutMix + normalise)": {"dataio": lambda: chain(batch, labels), "kornia": k_chain},
    }


def _pil_loop(pixels: np.ndarray, count: int) -> Callable[[], None]:
    """PIL RandAugment(2, 9) one image at a time, numpy in and out, one thread."""
    ra = PilRandAugment(2, 9, seed=0)
    images = [pixels[i % len(pixels)] for i in range(count)]

    def loop() -> None:
        for array in images:
            np.asarray(ra(Image.fromarray(array)))

    return loop


def paired_ratios(ours: Callable[[], Any], baseline: Callable[[], Any], device: torch.device,
                  repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of ``ours`` and ``baseline``, timed back to back ``repeats`` times.

    A shared machine's speed drifts over a benchmark; timing the pair together
    puts the same drift on both, so their per-pair ratio is what the report compares.
    Each side is timed right after a warm-up run of its own, as ``timed`` does for
    the table's rows: without it a batch that follows the PIL loop runs cold
    (fresh output pages, idle threads); two runs that way gave medians of 4.5 and
    5.7, against 5.1-7.9 with it.
    """
    ours_s, baseline_s = [], []
    for _ in range(repeats):
        ours_s.append(timed(ours, device, 1))
        baseline_s.append(timed(baseline, torch.device("cpu"), 1))
    return ours_s, baseline_s


def bench_augment(config: BenchAugmentConfig, log=print) -> dict[str, Any]:
    """Time every contender, print the table, write JSON/PNG; returns the result dict."""
    device = torch.device(config.device)
    pixels = photo_batch(config.batch_size, config.image_size)
    rows = []
    contenders = _contenders(config, pixels)
    for op, fns in contenders.items():
        seconds = {name: timed(fn, device, config.repeats) for name, fn in fns.items()}
        rows.append({"op": op, "dataio_ms": seconds["dataio"] * 1e3, "kornia_ms": seconds["kornia"] * 1e3,
                     "dataio_img_s": config.batch_size / seconds["dataio"],
                     "kornia_img_s": config.batch_size / seconds["kornia"],
                     "vs_kornia": seconds["kornia"] / seconds["dataio"]})
    ours_s, pil_s = paired_ratios(contenders["randaugment"]["dataio"], _pil_loop(pixels, config.pil_images),
                                  device, config.repeats)
    pil_rate = config.pil_images / statistics.median(pil_s)
    by_op = {row["op"]: row for row in rows}
    by_op["randaugment"]["pil_img_s"] = pil_rate
    pair_ratios = [(config.batch_size / ours) / (config.pil_images / pil)
                   for ours, pil in zip(ours_s, pil_s, strict=True)]
    by_op["randaugment"]["vs_pil"] = statistics.median(pair_ratios)
    by_op["randaugment"]["vs_pil_pairs"] = pair_ratios
    machine = machine_description()
    checks = {
        "randaugment_vs_kornia": by_op["randaugment"]["vs_kornia"],
        "randaugment_vs_pil_loop": by_op["randaugment"]["vs_pil"],
        "mixup_vs_kornia": by_op["mixup"]["vs_kornia"],
        "cutmix_vs_kornia": by_op["cutmix"]["vs_kornia"],
    }
    result = {
        "benchmark": "augment",
        "date": datetime.date.today().isoformat(),
        "machine": machine,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "torch_threads": torch.get_num_threads(),
        "rows": rows,
        "pil_loop": {"img_s_one_thread": pil_rate, "img_s_all_cores_ideal": pil_rate * (machine["cores"] or 1)},
        "checks": {k: {"value": v, "op": COMPARISONS[k][0], "against": COMPARISONS[k][1]} for k, v in checks.items()},
    }
    log(render(result))
    paths = write_results(config.out, f"augment-{device.type}", result,
                          {f"{r['op'][:24]} dataio": r["dataio_img_s"] for r in rows}
                          | {f"{r['op'][:24]} kornia": r["kornia_img_s"] for r in rows}
                          | {"randaugment PIL loop": pil_rate}, "images/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def render(result: dict[str, Any]) -> str:
    """The printed report: machine line, table, PIL loop, and dataio's speed against each baseline."""
    m, c = result["machine"], result["config"]
    head = (f"dataio bench augment, {result['date']}: {m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}; "
            f"device {c['device']}, batch {c['batch_size']}x3x{c['image_size']}x{c['image_size']} uint8, "
            f"torch threads {result['torch_threads']}, median of {c['repeats']}")
    table = format_table(result["rows"], [("op", "op", "s"), ("dataio_ms", "dataio ms", ",.1f"),
                                          ("kornia_ms", "kornia ms", ",.1f"), ("dataio_img_s", "dataio img/s", ",.0f"),
                                          ("kornia_img_s", "kornia img/s", ",.0f"), ("vs_kornia", "vs kornia", ".2f")])
    pil = result["pil_loop"]
    lines = [head, table, f"PIL RandAugment(2, 9) per-image loop: {pil['img_s_one_thread']:,.0f} img/s in one thread "
             f"({pil['img_s_all_cores_ideal']:,.0f} img/s if spread perfectly over {m['cores']} cores)"]
    pairs = next((row.get("vs_pil_pairs") for row in result["rows"] if row["op"] == "randaugment"), None)
    if pairs:
        lines.append("randaugment vs the PIL loop, per back-to-back pair: " + ", ".join(f"{r:.2f}" for r in pairs))
    lines.append(f"compared on this machine ({m['cpu']}, {m['cores']} cores, GPU: {m['gpu'] or 'none'}), dataio on "
                 f"{c['device']} with {result['torch_threads']} torch threads, images/s over the other's:")
    for name, check in result["checks"].items():
        op, against = COMPARISONS[name]
        lines.append(f"  {op}: dataio vs {against}: {check['value']:.2f}x")
    chain = next((row for row in result["rows"] if row["op"].startswith("train chain")), None)
    if chain:
        lines.append(f"  the whole train chain (RandAugment, MixUp/CutMix, normalise): {chain['dataio_ms']:,.1f} ms "
                     f"per batch of {c['batch_size']} on {c['device']}")
    return "\n".join(lines)
