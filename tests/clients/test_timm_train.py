"""timm's unmodified ``train.py`` (timm 1.0.28) trains on dataio folders with one edit: one import line.

``from dataio.timm_loader import create_dataset, create_loader`` after timm's own import; timm's mixup and
augment flags are kept (``--mixup 0.8 --cutmix 1.0 --aa rand-m9-mstd0.5-inc1 --reprob 0.25 --color-jitter 0.4``),
two tiny training steps run on the CPU, and the loaders dataio built (logged by ``dataio.timm_loader``) hold
exactly what timm's flags say: its RandAugment string parsed, its mixup dict, its erasing, and no colour jitter
(timm turns it off under RandAugment).
"""

from __future__ import annotations

import difflib
import re

import pytest

from dataio.augment.mix import MixConfig
from dataio.augment.random_erasing import ErasingConfig
from dataio.augment.timm_strings import TimmRandAugmentConfig
from dataio.formats.errors import ConfigError
from dataio.timm_loader import create_dataset, create_loader, split_folder
from tests.clients.conftest import UPSTREAM, run_client

IMPORT = "    Mixup, FastCollateMixup, AugMixDataset\n"
EDIT = "from dataio.timm_loader import create_dataset, create_loader  # dataio: the data from shard folders\n"
FLAGS = ["--mixup", "0.8", "--cutmix", "1.0", "--aa", "rand-m9-mstd0.5-inc1", "--reprob", "0.25", "--color-jitter",
         "0.4"]


def edited_train_py() -> tuple[str, int]:
    """timm's train.py with dataio's edit, and the number of hunks of its diff against the unmodified script."""
    original = (UPSTREAM / "timm_train.py").read_text()
    assert original.count(IMPORT) == 1
    edited = original.replace(IMPORT, IMPORT + EDIT)
    diff = list(difflib.unified_diff(original.splitlines(True), edited.splitlines(True), "train.py", "train.py"))
    return edited, sum(line.startswith("@@") for line in diff)


def test_timm_train_py_trains_on_dataio_with_its_flags_kept(client_env, coloured_shards, tmp_path):
    edited, hunks = edited_train_py()
    assert hunks <= 3
    script = tmp_path / "train.py"
    script.write_text(edited)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation"):
        (data / split).symlink_to(coloured_shards, target_is_directory=True)
    done = run_client([str(script), "--data-dir", str(data), "--model", "resnet10t", "--num-classes", "3",
                       "--img-size", "64", "--epochs", "1", "--batch-size", "16", "--device", "cpu", "--workers", "1",
                       "--output", str(tmp_path / "out"), "--log-interval", "1", *FLAGS], client_env, tmp_path,
                      timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert "Train: 0 [   1/2 (100%)]" in log and "*** Best metric" in log  # two steps, then timm's validation
    train = re.search(r"dataio\.timm_loader: train loader of .*?: (.*)", log)
    assert train, log[-4000:]
    mean_fill = (124.0, 116.0, 104.0)  # timm's img_mean for ImageNet's mean
    randaugment = TimmRandAugmentConfig.from_timm("rand-m9-mstd0.5-inc1", fill=mean_fill)
    mix = MixConfig.from_timm(dict(mixup_alpha=0.8, cutmix_alpha=1.0, cutmix_minmax=None, prob=1.0, switch_prob=0.5,
                                   mode="batch", label_smoothing=0.1, num_classes=3))  # train.py's mixup_args
    erasing = ErasingConfig(probability=0.25, mode="pixel", max_count=1)  # --reprob, --remode's default, --recount
    expected = f"image_size=64 randaugment={randaugment} mix={mix} color_jitter=None erasing={erasing}"
    assert train.group(1) == expected
    assert "eval loader of" in log and "SoftTargetCrossEntropy" in log


def test_timm_loader_refuses_what_dataio_does_not_do_naming_it(coloured_shards, tmp_path):
    (tmp_path / "val").symlink_to(coloured_shards, target_is_directory=True)
    assert split_folder(tmp_path, "validation") == tmp_path / "val"  # timm's split synonyms
    dataset = create_dataset("", root=str(tmp_path), split="validation")
    for options, named in [({"vflip": 0.5}, "vflip"), ({"num_aug_splits": 3}, "num_aug_splits"),
                           ({"train_crop_mode": "rkrc"}, "train_crop_mode"), ({"collate_fn": len}, "collate_fn"),
                           ({"auto_augment": "augmix-m5"}, "auto_augment"), ({"input_size": (3, 32, 48)}, "input_size")]:
        kwargs = {"input_size": 32, **options}
        with pytest.raises(ConfigError) as caught:
            create_loader(dataset, batch_size=4, is_training=True, device="cpu", **kwargs)
        assert str(caught.value).startswith(named) and "\n" not in str(caught.value), caught.value
    with pytest.raises(ConfigError, match="^dataset 'hfds/imagenet'"):
        create_dataset("hfds/imagenet", root=str(tmp_path))
