"""``dataio.timm_loader`` as timm's ``train.py`` calls it: a split without its folder, and ``crop_pct``.

timm's ``create_dataset`` falls back to ``--data-dir`` itself when no split folder (nor a synonym) exists; dataio
does the same but says it in one line, since a train and a validation split that both fall back read one folder
(evaluation on the training images, silently, before). ``crop_pct=0`` became timm's default 0.875 without a word
(``crop_pct or 0.875``, as timm's own ``transforms_imagenet_eval``): it is refused in one line."""

from __future__ import annotations

import logging

import pytest

from dataio.formats.errors import ConfigError
from dataio.timm_loader import create_dataset, create_loader


def test_a_missing_split_folder_reads_the_root_and_says_so_in_one_line(coloured_shards, caplog):
    with caplog.at_level(logging.WARNING, logger="dataio"):
        train = create_dataset("", root=str(coloured_shards), split="train")
        val = create_dataset("", root=str(coloured_shards), split="validation")
    assert train.source == val.source  # timm's _search_split: the root itself for both
    lines = [r.getMessage() for r in caplog.records if "_search_split" in r.getMessage()]
    assert len(lines) == 2 and all("\n" not in line and str(coloured_shards) in line for line in lines), lines
    assert "'train'" in lines[0] and "training" in lines[0] and "val or valid or validation" in lines[1], lines


def test_a_split_folder_found_is_quiet(coloured_shards, tmp_path, caplog):
    (tmp_path / "val").symlink_to(coloured_shards, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="dataio"):
        create_dataset("", root=str(tmp_path), split="validation")
    assert not [r for r in caplog.records if "_search_split" in r.getMessage()]


@pytest.mark.parametrize("crop_pct", [0, 0.0, -0.5, 1.5, float("nan"), "0.9"])
def test_a_crop_pct_that_is_not_a_share_is_refused_in_one_line(crop_pct, coloured_shards):
    dataset = create_dataset("", root=str(coloured_shards), split="validation")
    with pytest.raises(ConfigError) as caught:
        create_loader(dataset, input_size=32, batch_size=4, is_training=False, device="cpu", crop_pct=crop_pct)
    assert str(caught.value).startswith("crop_pct=") and "\n" not in str(caught.value), caught.value


@pytest.mark.parametrize("crop_pct, ratio", [(None, 0.875), (1.0, 1.0), (0.95, 0.95)])
def test_crop_pct_none_is_timms_default_and_a_share_is_honoured(crop_pct, ratio, coloured_shards):
    dataset = create_dataset("", root=str(coloured_shards), split="validation")
    loader = create_loader(dataset, input_size=32, batch_size=4, is_training=False, device="cpu", crop_pct=crop_pct)
    assert loader.config.val_crop_ratio == ratio
