"""``ShardDataset(folder, transform)`` with PIL-only transforms (torchvision v1's, as given to ``ImageFolder``).

torchvision does not import on the test machine: ``PilToTensor`` behaves as v1's ``ToTensor`` does (a PIL image
or ndarray to a float tensor in [0, 1]; a tensor is a TypeError, "pic should be PIL Image or ndarray").
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dataio import ShardDataset
from dataio.formats import fallback_log

ROOT = Path(__file__).resolve().parents[2]
HINT_KEY = "shard-dataset-to-pil"


class PilToTensor:
    """torchvision v1's ``ToTensor``: PIL image or ndarray (H, W, C) to a float (C, H, W) tensor in [0, 1]."""

    def __call__(self, pic):
        if not isinstance(pic, (Image.Image, np.ndarray)):
            raise TypeError(f"pic should be PIL Image or ndarray. Got {type(pic)}")
        return torch.from_numpy(np.asarray(pic, dtype=np.float32) / 255).permute(2, 0, 1).contiguous()


class PilResize:
    """A PIL-only resize, as torchvision v1's functional PIL ops: a tensor is a TypeError."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, image: Image.Image) -> Image.Image:
        if not isinstance(image, Image.Image):
            raise TypeError(f"img should be PIL Image. Got {type(image)}")
        return image.resize((self.size, self.size), Image.BILINEAR)


class Compose:
    def __init__(self, transforms: list) -> None:
        self.transforms = transforms

    def __call__(self, image):
        for transform in self.transforms:
            image = transform(image)
        return image


@pytest.fixture
def hint_unsaid():
    """The hint is said once per process: forget that it was, before and after the test."""
    fallback_log._said.discard(HINT_KEY)
    yield
    fallback_log._said.discard(HINT_KEY)


def _hints(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "to_pil=True" in r.getMessage()]


def test_a_pil_only_transform_is_given_pil_images_with_one_hint(real_photo_shards, hint_unsaid, caplog):
    caplog.set_level(logging.WARNING, logger="dataio")
    transform = Compose([PilResize(32), PilToTensor()])
    dataset = ShardDataset(real_photo_shards, transform)
    reference = ShardDataset(real_photo_shards, transform, to_pil=True)
    for index in range(3):
        image, label = dataset[index]
        assert image.dtype == torch.float32 and image.shape == (3, 32, 32) and 0 <= image.min() <= image.max() <= 1
        assert torch.equal(image, reference[index][0]) and label == reference[index][1]
    hints = _hints(caplog)
    assert len(hints) == 1, hints
    assert hints[0].startswith("dataio: ShardDataset: the transform Compose takes PIL images, not uint8 tensors "
                               "(img should be PIL Image. Got <class 'torch.Tensor'>), as ImageFolder's do: it is "
                               "given PIL images; pass to_pil=True to say so")
    assert pickle.loads(pickle.dumps(dataset))._pil_input  # workers started now skip the first try


def test_a_transform_failing_on_pil_too_raises_its_first_error(real_photo_shards, hint_unsaid, caplog):
    def broken(image):
        raise TypeError(f"broken on {type(image).__name__}")

    with pytest.raises(TypeError, match="^broken on Tensor$"):
        ShardDataset(real_photo_shards, broken)[0]
    assert not _hints(caplog)


def test_torchvision_v1_transforms_are_recognised_before_the_first_sample(real_photo_shards, hint_unsaid, caplog):
    caplog.set_level(logging.WARNING, logger="dataio")
    v1 = {name: type(name, (kind,), {"__module__": "torchvision.transforms.transforms"})
          for name, kind in (("Compose", Compose), ("ToTensor", PilToTensor), ("Resize", PilResize))}
    seen = []
    transform = v1["Compose"]([lambda image: seen.append(type(image)) or image, v1["Resize"](32), v1["ToTensor"]()])
    dataset = ShardDataset(real_photo_shards, transform)
    assert dataset._pil_input and _hints(caplog) == ["dataio: ShardDataset: the transform Compose takes PIL images "
                                                     "(torchvision v1), as ImageFolder's do: it is given PIL images; "
                                                     "pass to_pil=True to say so"]
    assert dataset[0][0].shape == (3, 32, 32) and seen == [Image.Image]  # never tried on the tensor
    assert not ShardDataset(real_photo_shards, v1["Resize"](32))._pil_input  # v1's Resize takes tensors


SCRIPT = """
import json, sys
import torch
import dataio
from tests.images.test_pil_transforms import Compose, PilResize, PilToTensor

if __name__ == "__main__":
    # ImageFolder(root, transforms.Compose([transforms.Resize(...), transforms.ToTensor()])), swapped
    train_dataset = dataio.ShardDataset(sys.argv[1], Compose([PilResize(32), PilToTensor()]))
    loader = torch.utils.data.DataLoader(train_dataset, batch_size=4, shuffle=True, num_workers=2,
                                         multiprocessing_context=sys.argv[2])
    batches = [images for images, _ in loader]
    print(json.dumps({"shapes": [list(b.shape) for b in batches], "dtype": str(batches[0].dtype)}))
"""


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_an_imagefolder_script_swapped_to_shard_dataset_runs_in_worker_processes(real_photo_shards, tmp_path,
                                                                                 context):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(real_photo_shards), context], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["dtype"] == "torch.float32" and result["shapes"][0] == [4, 3, 32, 32]
    lines = done.stderr.splitlines()
    if context == "spawn":  # CPython's resource tracker at a spawn DataLoader's exit: "1 leaked semaphore" and
        # "'/mp-...': No such file" (4 lines) in 1 of 12 runs of a plain torch 2.13 script without dataio
        lines = [line for line in lines if "resource_tracker" not in line]
    assert 1 <= len(lines) <= 2 and all("pass to_pil=True to say so" in line for line in lines), lines  # per worker


OWN_PIL_SCRIPT = """
import json, sys
import torch
from PIL import Image, ImageEnhance
import dataio
from tests.images.test_pil_transforms import Compose, PilToTensor


class Grayscale:  # a script's own PIL transforms, as ImageFolder scripts carry: PIL methods, no type check
    def __call__(self, image):
        return image.convert("L").convert("RGB")


class Brighter:
    def __call__(self, image):
        return ImageEnhance.Brightness(image).enhance(1.2)


class Square:
    def __call__(self, image):
        return image.resize((32, 32), Image.BILINEAR)


if __name__ == "__main__":
    transform = {"grayscale": Grayscale(), "brighter": Brighter(), "square": Square()}[sys.argv[2]]
    dataset = dataio.ShardDataset(sys.argv[1], Compose([transform, Square(), PilToTensor()]))
    loader = dataio.DataLoader(dataset, batch_size=4, shuffle=True, num_workers=2)
    batches = [images for images, _ in loader]
    print(json.dumps({"shapes": [list(b.shape) for b in batches], "loader": type(loader).__module__}))
"""


@pytest.mark.parametrize("own", ["grayscale", "brighter", "square"])  # on a tensor: Attribute-, Value-, RuntimeError
def test_a_scripts_own_pil_transforms_are_given_pil_images(real_photo_shards, tmp_path, own):
    script = tmp_path / "train.py"
    script.write_text(OWN_PIL_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(real_photo_shards), own], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["loader"].startswith("torch.utils.data") and result["shapes"][0] == [4, 3, 32, 32]
    lines = [line for line in done.stderr.splitlines() if "resize is deprecated" not in line  # torch's warning,
             and "image.resize((32, 32)" not in line]  # and its source line, for Tensor.resize in the first try
    assert 1 <= len(lines) <= 2 and all("pass to_pil=True to say so" in line for line in lines), lines  # per worker
