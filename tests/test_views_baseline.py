"""The views benchmark's baseline (DINOv2's DataAugmentationDINO on torchvision-style PIL transforms, in DataLoader
workers) does DINOv2's work: torchvision's random draws, DINOv2's probabilities per view, its collate order, one
decode per image.

Only the CLI imports ``dataio.bench`` (tests/test_layout.py): the checks run in two subprocesses, started together
(the pure checks, and a 2-worker DataLoader run), each printing its findings as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.once_per_run import once_per_run

ROOT = Path(__file__).resolve().parents[1]

CHECKS = """
import json, math, sys
from multiprocessing import Value
from pathlib import Path
import numpy as np
import torch
from PIL import Image
from dataio.bench.views_baseline import (DataAugmentationDINO, collate_views, count_decodes,
                                         dino_default_augmentation)
from dataio.bench.views_transforms import ColorJitter, RandomResizedCrop, gaussian_blur
torch.set_num_threads(1)  # as in a DataLoader worker (two threads spin against each other on a busy 2-core VM)
found = {}

def torchvision_get_params(width, height, scale, ratio):
    # torchvision 0.29 transforms.RandomResizedCrop.get_params, transcribed line for line
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = torch.randint(0, height - h + 1, size=(1,)).item()
            j = torch.randint(0, width - w + 1, size=(1,)).item()
            return (i, j, h, w), False
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    return ((height - h) // 2, (width - w) // 2, h, w), True

mismatches, fallbacks, compared = 0, 0, 0
for size in [(500, 375), (375, 500), (64, 64), (300, 12), (12, 300), (7, 9)]:
    image = Image.new("RGB", size)
    for scale in [(0.32, 1.0), (0.05, 0.32), (0.08, 1.0), (0.9, 1.0)]:
        for seed in range(40):
            torch.manual_seed(seed)
            ours = RandomResizedCrop.get_params(image, scale, (3 / 4, 4 / 3))
            after_ours = torch.rand(1).item()
            torch.manual_seed(seed)
            theirs, fell_back = torchvision_get_params(*size, scale, (3 / 4, 4 / 3))
            after_theirs = torch.rand(1).item()
            mismatches += ours != theirs or after_ours != after_theirs
            fallbacks += fell_back
            compared += 1
found["get_params"] = {"compared": compared, "mismatches": mismatches, "fallbacks": fallbacks}

jitter = ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)
torch.manual_seed(7)
ours = [jitter.get_params(jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue) for _ in range(200)]
torch.manual_seed(7)
theirs = [(torch.randperm(4), *(float(torch.empty(1).uniform_(a, b)) for a, b in
           [(0.6, 1.4), (0.6, 1.4), (0.8, 1.2), (-0.1, 0.1)])) for _ in range(200)]
found["jitter_params_equal"] = all(o[0].tolist() == t[0].tolist() and o[1:] == t[1:] for o, t in zip(ours, theirs))
found["jitter_ranges"] = [jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue]

# the probabilities of each view's pipeline, on an 8x8 image, each leaf wrapped to count the calls that changed
# the image; the jitter and the blur (applied or not by RandomApply, not by themselves) make their draws and
# return a copy, to keep the test fast
class Counted:
    def __init__(self, transform, name):
        self.transform, self.name = transform, name
        if name == "ColorJitter":
            j = transform
            self.transform = lambda img: (j.get_params(j.brightness, j.contrast, j.saturation, j.hue), img.copy())[1]
        elif name == "GaussianBlur":
            self.transform = lambda img: (torch.empty(1).uniform_(0.1, 2.0), img.copy())[1]
    def __call__(self, img):
        out = self.transform(img)
        counts[self.name] = counts.get(self.name, 0) + (out is not img)
        return out

def wrap(transform):
    for index, member in enumerate(getattr(transform, "transforms", [])):
        if hasattr(member, "transforms"):  # Compose, RandomApply
            if id(member) not in wrapped:
                wrapped.add(id(member))
                wrap(member)
        elif type(member).__name__ in ("ColorJitter", "RandomGrayscale", "GaussianBlur", "RandomSolarize",
                                        "RandomHorizontalFlip"):
            transform.transforms[index] = Counted(member, type(member).__name__)

augmentation = DataAugmentationDINO((0.32, 1.0), (0.05, 0.32), 8, global_crops_size=8, local_crops_size=8)
wrapped = set()
for pipeline in (augmentation.global_transfo1, augmentation.global_transfo2, augmentation.local_transfo,
                 augmentation.geometric_augmentation_global):
    wrap(pipeline)
tiny = Image.fromarray(np.random.default_rng(0).integers(0, 256, (8, 8, 3), dtype=np.uint8))
torch.manual_seed(0)
draws = 2000
rates = {}
for name in ("global_transfo1", "global_transfo2", "local_transfo", "geometric_augmentation_global"):
    counts = {}
    for _ in range(draws):
        getattr(augmentation, name)(tiny)
    rates[name] = {k: v / draws for k, v in counts.items()}
found["rates"] = rates
found["draws"] = draws

# the default recipe on a photo-sized image: DINOv2's dict, float32 views, ImageNet normalisation
photo = Image.fromarray(np.random.default_rng(1).integers(0, 256, (375, 500, 3), dtype=np.uint8))
torch.manual_seed(3)
views = dino_default_augmentation()(photo)
mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
low, high = (0 - mean) / std, (1 - mean) / std
found["views"] = {
    "keys": sorted(views), "offsets": list(views["offsets"]),
    "teacher_same": all(a is b for a, b in zip(views["global_crops"], views["global_crops_teacher"])),
    "global": [[list(v.shape), str(v.dtype)] for v in views["global_crops"]],
    "local": [[list(v.shape), str(v.dtype)] for v in views["local_crops"]],
    "in_range": all(bool((v[c] >= low[c] - 1e-5).all() and (v[c] <= high[c] + 1e-5).all())
                    for v in views["global_crops"] + views["local_crops"] for c in range(3))}
normalize = dino_default_augmentation().normalize
pixels = np.random.default_rng(2).integers(0, 256, (5, 6, 3), dtype=np.uint8)
expected = (pixels.transpose(2, 0, 1) / 255.0 - mean[:, None, None]) / std[:, None, None]
tensor = normalize(Image.fromarray(pixels))
found["normalize_error"] = float(np.abs(tensor.numpy() - expected).max())
found["normalize_dtype"] = str(tensor.dtype)

# torchvision's blur (float32 2-D kernel, reflect padding, rounding) against a float64 numpy reference
pixels = np.random.default_rng(4).integers(0, 256, (20, 17, 3), dtype=np.uint8)
sigma = 1.3
x = np.arange(9) - 4.0
k = np.exp(-0.5 * (x / sigma) ** 2)
k /= k.sum()
padded = np.pad(pixels.astype(np.float64), ((4, 4), (4, 4), (0, 0)), mode="reflect")
reference = np.zeros(pixels.shape)
for dy in range(9):
    for dx in range(9):
        reference += k[dy] * k[dx] * padded[dy:dy + 20, dx:dx + 17]
blurred = np.asarray(gaussian_blur(Image.fromarray(pixels), 9, sigma)).astype(np.int64)
found["blur_worst"] = int(np.abs(blurred - np.round(reference)).max())
found["blur_shape"] = list(blurred.shape)

# collate: view-major, each sample's crops marked by value (sample * 100 + view)
samples = [({"global_crops": [torch.full((3, 4, 4), s * 100.0 + v) for v in range(2)],
             "local_crops": [torch.full((3, 2, 2), s * 100.0 + v) for v in range(8)]}, 0) for s in range(5)]
batch = collate_views(samples, dtype=torch.float32)
found["collate"] = {"keys": sorted(batch), "global": list(batch["collated_global_crops"].shape),
                    "local": list(batch["collated_local_crops"].shape),
                    "global_order": batch["collated_global_crops"][:, 0, 0, 0].tolist(),
                    "local_order": batch["collated_local_crops"][:, 0, 0, 0].tolist(),
                    "default_dtype": str(collate_views(samples)["collated_global_crops"].dtype)}

# the decode counter counts PIL's decodes, not calls: a second load() of a decoded image is no decode
counter = Value("q", 0)
count_decodes(counter)
path = Path(sys.argv[1])
image = Image.open(path).convert("RGB")
image.load()
once = counter.value
Image.open(path).convert("RGB")
found["decodes"] = [once, counter.value]
print(json.dumps(found))
"""

LOADER = """
import json, sys
from pathlib import Path
from dataio.bench.views_baseline import run_baseline
from dataio.bench.views_profile import profile_stages
files = sorted(Path(sys.argv[1]).glob("*.jpg"))
result = run_baseline(files, batch_size=4, workers=2, epochs=1, warmup=1, seed=0)
result["profile"] = profile_stages(files[:4], batch_size=2)
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory, worker_id) -> tuple[dict, dict]:
    """Both scripts' findings, over 8 small JPEGs (landscape and portrait), once per run (``once_per_run``: the
    module's tests may land on both workers)."""
    def run_both(folder: Path) -> dict:
        rng = np.random.default_rng(0)
        for i in range(8):
            shape = (90, 120, 3) if i % 2 else (120, 90, 3)
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)).save(folder / f"{i}.jpg", quality=90)
        runs = [subprocess.Popen([sys.executable, "-c", script, str(arg)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=ROOT)
                for script, arg in ((CHECKS, folder / "0.jpg"), (LOADER, folder))]
        results = []
        for run in runs:
            out, err = run.communicate(timeout=300)
            assert run.returncode == 0, err[-3000:]
            results.append(json.loads(out))
        return {"checks": results[0], "loader": results[1]}
    result = once_per_run(tmp_path_factory, worker_id, "views_baseline", run_both)
    return result["checks"], result["loader"]


def test_random_resized_crop_draws_as_torchvision(found) -> None:
    """Same windows and the same number of draws as torchvision's get_params, fallbacks included."""
    params = found[0]["get_params"]
    assert params["mismatches"] == 0 and params["compared"] == 960 and params["fallbacks"] > 0, params


def test_color_jitter_draws_as_torchvision(found) -> None:
    assert found[0]["jitter_params_equal"]
    assert found[0]["jitter_ranges"] == [[0.6, 1.4], [0.6, 1.4], [0.8, 1.2], [-0.1, 0.1]]


def test_each_views_probabilities_are_dinov2s(found) -> None:
    """Jitter 0.8 and grayscale 0.2 on every view; solarize 0.2 on the second global view only; the blur as
    DINOv2's code runs it (its GaussianBlur hands 1 - p to RandomApply): never on the first global view, 0.9 on
    the second, 0.5 on the local ones; flips 0.5. Bounds: 4.5 standard deviations of 2000 draws."""
    rates, draws = found[0]["rates"], found[0]["draws"]
    expected = {"global_transfo1": {"ColorJitter": 0.8, "RandomGrayscale": 0.2, "GaussianBlur": 0.0},
                "global_transfo2": {"ColorJitter": 0.8, "RandomGrayscale": 0.2, "GaussianBlur": 0.9,
                                    "RandomSolarize": 0.2},
                "local_transfo": {"ColorJitter": 0.8, "RandomGrayscale": 0.2, "GaussianBlur": 0.5},
                "geometric_augmentation_global": {"RandomHorizontalFlip": 0.5}}
    for view, stages in expected.items():
        seen = {k: v for k, v in rates[view].items() if v > 0}
        assert seen.keys() == {k for k, p in stages.items() if p > 0}, (view, rates[view])
        for stage, p in stages.items():
            bound = 4.5 * (p * (1 - p) / draws) ** 0.5
            assert abs(rates[view].get(stage, 0.0) - p) <= bound, (view, stage, rates[view])


def test_views_are_dinov2s_dict_of_normalised_float32(found) -> None:
    views = found[0]["views"]
    assert views["keys"] == ["global_crops", "global_crops_teacher", "local_crops", "offsets"]
    assert views["offsets"] == [] and views["teacher_same"] and views["in_range"]
    assert views["global"] == [[[3, 224, 224], "torch.float32"]] * 2
    assert views["local"] == [[[3, 96, 96], "torch.float32"]] * 8
    assert found[0]["normalize_error"] < 1e-6 and found[0]["normalize_dtype"] == "torch.float32"


def test_the_blur_is_torchvisions_reflect_padded_convolution(found) -> None:
    """Within one level of a float64 reference (float32 sums can round the other way at .5)."""
    assert found[0]["blur_worst"] <= 1 and found[0]["blur_shape"] == [20, 17, 3]


def test_collate_is_view_major_as_dinov2s(found) -> None:
    collate = found[0]["collate"]
    assert collate["keys"] == ["collated_global_crops", "collated_local_crops"]
    assert collate["global"] == [10, 3, 4, 4] and collate["local"] == [40, 3, 2, 2]
    assert collate["global_order"] == [s * 100 + v for v in range(2) for s in range(5)]
    assert collate["local_order"] == [s * 100 + v for v in range(8) for s in range(5)]
    assert collate["default_dtype"] == "torch.float16"  # DINOv2's train.py casts the crops to half


def test_the_decode_counter_counts_decodes(found) -> None:
    assert found[0]["decodes"] == [1, 2]


def test_run_baseline_decodes_each_image_once_and_counts_the_workers_cpu(found) -> None:
    """2 workers, a warm-up epoch then one measured: every image decoded once, and the CPU per image is the
    workers' (tens of ms for 10 views; the main process alone spends well under 1 ms an image)."""
    result = found[1]
    assert result["decodes_per_image"] == 1.0 and result["images_per_epoch"] == 8, result
    assert result["batch_shapes"] == {"collated_global_crops": [8, 3, 224, 224],
                                      "collated_local_crops": [32, 3, 96, 96]}
    assert len(result["images_per_s"]) == 1 and result["images_per_s"][0] > 0
    assert result["cpu_us_per_image"][0] > 5000, result


def test_the_profile_times_every_stage_where_it_runs(found) -> None:
    """Each stage counted where it changes the image: one decode, 10 crops, 10 tensors, every image collated."""
    profile = found[1]["profile"]
    applied = profile["applied_per_image"]
    assert profile["images"] == 4 and applied["decode"] == 1 and applied["collate"] == 1, profile
    assert applied["crop+resize"] == 10 and applied["to-tensor+normalize"] == 10, profile
    assert 0 < applied["jitter"] <= 10 and applied["solarize"] <= 1, profile
    stages = profile["us_per_image"]
    assert all(stages[s] > 0 for s in ("decode", "crop+resize", "jitter", "to-tensor+normalize", "collate"))
    assert abs(sum(stages.values()) - profile["total_us_per_image"]) < 1e-6 * profile["total_us_per_image"]
