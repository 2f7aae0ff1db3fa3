"""A timm transform given as the loader's ``transform=`` (client subprocess): PIL-only steps work, a whole
pipeline is refused in one line naming ``to_pil``; before, both failed deep in PIL (``histogram() received an
invalid combination``) on the uint8 tensor the loader gives.

The loader recognises PIL-only transforms as ``ShardDataset`` does (``dataio.images.pil_transform``): each crop
goes to timm's ops as a PIL image and comes back as uint8. timm's full ``create_transform`` ends in ToTensor and
Normalize (float), which the loader's uint8 batch cannot hold: the one line says to give it to
``ShardDataset(..., to_pil=True)``, which ``dataio.DataLoader`` reads, and that works too.
"""

from __future__ import annotations

import json

from tests.clients.conftest import run_client

SCRIPT = r"""
import json, sys
import torch
import dataio
from timm.data import create_transform
folder, out = sys.argv[1], {}
full = create_transform(64, is_training=True, auto_augment="rand-m9-mstd0.5")
primary, secondary, final = create_transform(64, is_training=True, auto_augment="rand-m9-mstd0.5", separate=True)
plain = dict(batch_size=6, image_size=64, shuffle=True, seed=2, normalize=False, num_workers=1)
# timm's RandAugment (PIL) leaves a solid colour unchanged in many of its ops (equalize, sharpness, autocontrast):
# the whole epoch, not one batch of 6, is compared with the plain one (one batch was unchanged in a CI run).
bases = [images for images, _ in dataio.DataLoader(folder, **plain)]
augmented = [images for images, _ in dataio.DataLoader(folder, **plain, transform=secondary)]
changed = any(bool((images != base).any()) for images, base in zip(augmented, bases, strict=True))
out["secondary"] = [str(augmented[0].dtype), list(augmented[0].shape), changed]
try:
    next(iter(dataio.DataLoader(folder, **plain, transform=full)))
    out["full"] = "no error"
except Exception as error:
    out["full"] = f"{type(error).__name__}: {error}"
dataset = dataio.ShardDataset(folder, transform=full, to_pil=True)
images, labels = next(iter(dataio.DataLoader(dataset, batch_size=6, shuffle=True)))
out["shard_dataset"] = [str(images.dtype), list(images.shape)]
print(json.dumps(out))
"""


def test_timm_transforms_through_the_loader(client_env, coloured_shards, tmp_path):
    (tmp_path / "script.py").write_text(SCRIPT)
    done = run_client([str(tmp_path / "script.py"), str(coloured_shards)], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["secondary"] == ["torch.uint8", [6, 3, 64, 64], True]  # timm's PIL RandAugment ran on each crop
    assert "to_pil=True" in out["full"] and out["full"].startswith("ConfigError: transform Compose takes PIL images")
    assert "\n" not in out["full"] and "histogram" not in out["full"]
    assert out["shard_dataset"] == ["torch.float32", [6, 3, 64, 64]]
    assert "ImageLoader: transform= Compose takes PIL images, not uint8 tensors" in done.stderr  # the one hint line
