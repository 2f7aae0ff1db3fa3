"""libjpeg's damaged-data warnings are errors: at pack time (rejected, named) and at read time (a sample error).

PIL decodes a JPEG cut short in mid-scan or with a flipped bit without a word (libjpeg only warns
and fills what it lost with grey); these tests build such files, check that PIL indeed accepts them,
then that dataio does not.
"""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest
from PIL import Image

from dataio import ImageLoader
from dataio.formats.jpeg._jpeg_codec import CorruptJPEGError, add_restart_markers, check
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.image_prepare import ImagePrepareConfig, PreparedImage, prepare_image
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.dataset.sample_table import read_sample_table
from dataio.images.turbo_decode import decode_crop_into


def _photo(seed: int, size: tuple[int, int] = (96, 64)) -> bytes:
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (size[1] // 8, size[0] // 8, 3), dtype=np.uint8)
    image = Image.fromarray(small).resize(size, Image.BILINEAR)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def _entropy_start(data: bytes) -> int:
    sos = data.index(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


def _pil_accepts(data: bytes) -> bool:
    try:
        Image.open(io.BytesIO(data)).load()
    except (OSError, ValueError):
        return False
    return True


def _flipped_but_pil_silent(data: bytes, seed: int) -> bytes:
    """``data`` with one entropy-coded bit flipped such that libjpeg warns and PIL still decodes."""
    rng = np.random.default_rng(seed)
    for _ in range(500):
        damaged = bytearray(data)
        damaged[int(rng.integers(_entropy_start(data) + 4, len(data) - 4))] ^= 1 << int(rng.integers(8))
        try:
            check(bytes(damaged))
        except CorruptJPEGError:
            if _pil_accepts(bytes(damaged)):
                return bytes(damaged)
    raise AssertionError("no flip found that libjpeg warns about")


def _damaged_files() -> dict[str, bytes]:
    clean = _photo(1)
    return {
        "flipped": _flipped_but_pil_silent(clean, 0),
        "flipped_restarts": _flipped_but_pil_silent(add_restart_markers(clean, 2), 1),
        "cut_mid_scan": clean[:len(clean) * 2 // 3] + b"\xff\xd9",  # ends early, EOI present
    }


def test_pil_decodes_every_damaged_file_silently():
    """The premise: without dataio's check these would be packed as wrong images."""
    for name, data in _damaged_files().items():
        assert _pil_accepts(data), name
        with pytest.raises(CorruptJPEGError):
            check(data)
    check(_photo(1))  # a clean file passes


@pytest.mark.parametrize("options", [{}, {"quality": 80}, {"max_side": 32}, {"restart_interval": 0}],
                         ids=["kept", "reencoded", "resized", "no-restarts"])
def test_prepare_rejects_damaged_data_on_every_path(options):
    config = ImagePrepareConfig(**options)
    for name, data in _damaged_files().items():
        result = prepare_image(data, config)
        assert getattr(result, "reason", "").startswith("damaged JPEG data: "), (name, result)
    assert isinstance(prepare_image(_photo(1), config), PreparedImage)  # the clean file is packed


def test_convert_lists_damaged_files_and_packs_the_rest(tmp_path):
    src = tmp_path / "src"
    (src / "cat").mkdir(parents=True)
    for index in range(3):
        (src / "cat" / f"clean{index}.jpg").write_bytes(_photo(10 + index))
    for name, data in _damaged_files().items():
        (src / "cat" / f"{name}.jpg").write_bytes(data)
    summary = convert_images(ConvertImagesConfig(src=src, out=tmp_path / "out", num_workers=1, progress=False))
    assert summary.num_samples == 3 and summary.num_rejected == 3
    rejected = [json.loads(line) for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()]
    assert {r["path"] for r in rejected} == {f"cat/{name}.jpg" for name in _damaged_files()}
    assert all(r["reason"].startswith("damaged JPEG data: ") for r in rejected)
    assert any("Premature end" in r["reason"] or "Corrupt JPEG data" in r["reason"] for r in rejected)


def test_the_region_decoder_refuses_damaged_data_instead_of_grey_pixels():
    out = np.zeros((32, 32, 3), np.uint8)
    whole = np.array([0.0, 0.0, 96.0, 64.0])
    for name, data in _damaged_files().items():
        with pytest.raises(ValueError, match="damaged data"):
            decode_crop_into(data, whole, False, out)
    decode_crop_into(_photo(1), whole, False, out)


def test_a_damaged_sample_in_a_shard_without_checksums_is_a_named_sample_error(image_shards, tmp_path):
    """With the checksum off (or in shards packed before it), libjpeg's warning still catches the damage."""
    out = tmp_path / "copy"
    shutil.copytree(image_shards, out)
    folder, manifest = read_manifest(out)
    table = read_sample_table(folder / manifest.sample_table)
    sample = 3
    path = out / manifest.shards[int(table.shard[sample])].file
    offset, size = int(table.offset[sample]), int(table.size[sample])
    shard = bytearray(path.read_bytes())
    image = bytes(shard[offset:offset + size])
    damaged = image[:size * 2 // 3] + b"\x00" * (size - size * 2 // 3 - 2) + b"\xff\xd9"  # scan cut short
    assert _pil_accepts(damaged)
    shard[offset:offset + size] = damaged
    path.write_bytes(bytes(shard))
    loader = ImageLoader(out, batch_size=16, image_size=32, on_error="skip", verify_samples=False, shuffle=False)
    seen = sum(len(labels) for _, labels in loader)
    assert seen == len(table) - 1
    (error,) = loader.stats.errors
    assert error["key"] == table.key(sample) and "damaged data" in error["reason"]
    loader.close()
