"""The generated photo classes have the sizes real photos have (the loaders' speed depends on it)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from dataio.formats.images.synthetic import PHOTO_CLASSES, SyntheticImagesConfig, photo_bytes, write_image_folder


@pytest.mark.parametrize("photo_class, low, high", [("small", 25_000, 80_000), ("imagenet", 80_000, 200_000),
                                                    ("camera", 1_500_000, 6_000_000)])
def test_photo_class_sizes(photo_class, low, high):
    rng = np.random.default_rng(0)
    count = 2 if photo_class == "camera" else 8
    sizes = [len(photo_bytes(1, rng, photo_class)) for _ in range(count)]
    assert all(low <= s <= high for s in sizes), sizes


def test_camera_photos_have_camera_pixels(tmp_path):
    write_image_folder(tmp_path, SyntheticImagesConfig(num_classes=1, images_per_class=1, photo_class="camera"))
    (path,) = tmp_path.rglob("*.JPEG")
    with Image.open(path) as image:
        assert image.width * image.height >= 5_000_000
        assert (image.width, image.height) in PHOTO_CLASSES["camera"].sizes


def test_unknown_photo_class_is_named():
    with pytest.raises(ValueError, match="photo_class"):
        SyntheticImagesConfig(photo_class="huge")
