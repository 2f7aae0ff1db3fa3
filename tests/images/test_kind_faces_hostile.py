"""The faces per kind (PairLoader, DetectionLoader, ViewsLoader on dataio/images/kind_loader.py): another kind's
folder, another face's keywords, another kind's options inside ``config=``."""

from __future__ import annotations

import pytest

import dataio
from dataio.detection.detection_config import DetectionConfig
from dataio.errors import ConfigError
from dataio.formats.kinds import KINDS
from dataio.pairs.caption_config import CaptionConfig

SMALL_VIEWS = dataio.ViewsConfig(global_size=32, local_size=16, local_crops=1)


# Class 8 (errors): PairLoader given a views folder (or a COCO folder) says the folder "holds images with classes
# (its batches are (images, labels))": the wording is hard-coded in pairs/caption_data.py from before kinds, and is
# false for both (views have no classes, COCO holds boxes). The kind's own description (the table's `what`) should
# be named.
@pytest.mark.parametrize("folder, kind", [("views_shards", "views"), ("coco_shards", "detection")])
def test_pair_loader_on_another_kinds_folder_says_what_the_folder_holds(request, folder, kind):
    with pytest.raises(ConfigError) as caught:
        dataio.PairLoader(request.getfixturevalue(folder), batch_size=4)
    message = str(caught.value)
    assert "with classes" not in message, message
    assert KINDS[kind].what in message, message


# Class 5 (flags accepted and ignored): an ImageLoaderConfig carrying another kind's options is taken by a face that
# does not read them, silently: PairLoader(config=ImageLoaderConfig(captions=CaptionConfig(max_length=5))) pads to 24
# tokens (the config's captions are dropped for the default CaptionConfig), ViewsLoader(config=...targets=...) reads a
# COCO folder ignoring the targets. Either honour them or refuse them in one line naming the option.
def test_pair_loader_honours_or_refuses_captions_given_in_its_config(pair_tars):
    config = dataio.ImageLoaderConfig(captions=CaptionConfig(max_length=5, pad_multiple=1), batch_size=4,
                                      image_size=32)
    try:
        loader = dataio.PairLoader(pair_tars, config=config)
    except ConfigError as e:
        assert "captions" in str(e)
        return
    with loader:
        batch = next(iter(loader))
    assert batch["input_ids"].shape[1] <= 5, f"config's captions ignored: ids {tuple(batch['input_ids'].shape)}"


def test_views_loader_refuses_box_targets_given_in_its_config(coco_shards):
    config = dataio.ImageLoaderConfig(targets=DetectionConfig(), batch_size=4)
    with pytest.raises(ConfigError, match="targets"):
        dataio.ViewsLoader(coco_shards, config=config, views=SMALL_VIEWS)


# Class 8: another face's keyword is "unknown", with a wrong suggestion: ViewsLoader(folder, captions=...) says "did
# you mean 'storage_options'?"; PairLoader(folder, views=...) says nothing of ViewsLoader. The face that takes the
# keyword should be named.
@pytest.mark.parametrize("face, folder, keyword, owner", [
    ("ViewsLoader", "coloured_shards", dict(captions=CaptionConfig()), "PairLoader"),
    ("ViewsLoader", "coloured_shards", dict(targets=DetectionConfig()), "DetectionLoader"),
    ("PairLoader", "pair_tars", dict(views=SMALL_VIEWS), "ViewsLoader"),
])
def test_another_faces_keyword_names_that_face(request, face, folder, keyword, owner):
    with pytest.raises(ConfigError) as caught:
        getattr(dataio, face)(request.getfixturevalue(folder), batch_size=4, **keyword)
    message = str(caught.value)
    assert "storage_options" not in message, message
    assert owner in message, message
