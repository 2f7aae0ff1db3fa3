"""Multi-crop views colour each view themselves: timm's colour jitter and random erasing are refused naming them."""

from __future__ import annotations

import pytest

import dataio
from dataio.formats.errors import ConfigError


@pytest.mark.parametrize("option, named", [({"color_jitter": 0.4}, "color_jitter"),
                                           ({"re_prob": 0.25, "normalize": True}, "re_prob")])
def test_timm_ops_on_views_are_refused_naming_them(coloured_shards, option, named) -> None:
    with pytest.raises(ConfigError) as caught:
        dataio.ViewsLoader(coloured_shards, views=dataio.ViewsConfig(), batch_size=4, **option)
    assert str(caught.value).startswith(named) and "is not for multi-crop views" in str(caught.value)
