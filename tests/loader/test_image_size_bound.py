"""``image_size`` is bounded when the config is built (issue 43): an output image larger than the largest image
dataio decodes, or a batch past ``MAX_BATCH_BYTES`` as float32, is one ConfigError line naming image_size, before
anything is read (a (100000, 100000) size was built and its first batch died in the allocator)."""

from __future__ import annotations

import pytest

from dataio.formats.errors import ConfigError
from dataio.images.config import ImageLoaderConfig


@pytest.mark.parametrize("options", [dict(image_size=(100000, 100000)), dict(image_size=(9000, 99999)),
                                     dict(image_size=100000), dict(image_size=4096, batch_size=2000)])
def test_a_huge_image_size_is_one_config_error(options) -> None:
    with pytest.raises(ConfigError, match="image_size") as error:
        ImageLoaderConfig(**options)
    assert "\n" not in str(error.value) and "GiB" in str(error.value)


def test_real_sizes_still_build() -> None:
    assert ImageLoaderConfig(image_size=(800, 1333), batch_size=16).output_shape == (800, 1333)
    assert ImageLoaderConfig(image_size=224, batch_size=1024).image_size == 224
