"""timm's device ops (its RandAugment strings, colour jitter, random erasing) on a box folder: refused in one line.

The detection finish maps boxes through dataio's RandAugment draws only; the timm stages would change the
image and not the boxes (erasing could hide objects), or be dropped silently.
"""

from __future__ import annotations

import pytest

from dataio import DetectionLoader
from dataio.formats.errors import ConfigError


@pytest.mark.parametrize("option, named", [({"randaugment": "rand-m9-mstd0.5"}, "randaugment"),
                                           ({"color_jitter": 0.4}, "color_jitter"),
                                           ({"re_prob": 0.25, "normalize": True}, "re_prob")])
def test_timm_ops_on_boxes_are_refused_naming_them(coco_shards, option, named) -> None:
    with pytest.raises(ConfigError) as caught:
        DetectionLoader(coco_shards, batch_size=4, **option)
    assert str(caught.value).startswith(named) and "\n" not in str(caught.value)
