"""Property-based fuzzing (hypothesis): mutated shards, manifests, token files and JPEG bytes.

The only allowed outcomes are a correct result or a dataio error (for the
decoder front-end: the data exceptions the loader turns into ``SampleError``).
Never an interpreter crash, a hang or an unbounded allocation. ``make test``
runs a short campaign; ``make fuzz`` a long one (``--hypothesis-profile=long``).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataio import ImageLoader
from dataio.errors import DATA_EXCEPTIONS, DataioError
from dataio.text.token_shards import TokenShards
from dataio.images.turbo_decode import REGION_DECODE, decode_crop_into
from dataio.formats.dataset.manifest import MANIFEST_NAME, parse_manifest
from dataio.formats.dataset.verify import count_tar_samples

pytestmark = pytest.mark.fuzz
FIXTURES = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def mutations(size: int) -> st.SearchStrategy:
    """Lists of (position, xor byte) flips, a truncation point, and bytes appended."""
    return st.tuples(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 255)), max_size=8),
                     st.one_of(st.none(), st.integers(0, size)), st.binary(max_size=64))


def mutate(data: bytes, mutation, keep_size: bool = False) -> bytes:
    flips, cut, tail = mutation
    out = bytearray(data)
    for position, xor in flips:
        out[position] ^= xor
    if not keep_size:
        out = out[:cut] + tail if cut is not None else out + tail
    return bytes(out)


def mutated_copy(source: Path, pattern: str, tmp_path_factory, data, keep_size: bool) -> tuple[Path, Path]:
    """A copy of the shard folder ``source`` with one shard matching ``pattern`` mutated: (folder, shard)."""
    folder = tmp_path_factory.mktemp("fuzz") / "shards"
    shutil.copytree(source, folder)
    shards = sorted(folder.glob(pattern))
    shard = shards[data.draw(st.integers(0, len(shards) - 1))]
    raw = shard.read_bytes()
    shard.write_bytes(mutate(raw, data.draw(mutations(len(raw))), keep_size=keep_size))
    return folder, shard


@pytest.fixture(scope="module")
def jpeg_sample(coloured_shards) -> bytes:
    shard = sorted(coloured_shards.glob("shard-*.tar"))[0]
    import tarfile

    with tarfile.open(shard) as tar:
        member = next(m for m in tar if m.name.endswith(".jpg"))
        return tar.extractfile(member).read()


@FIXTURES
@given(data=st.data())
def test_decoder_front_end_gives_an_image_or_a_data_error(jpeg_sample, data):
    """Both decode paths (region and whole image), any crop box (also outside the image) and output size."""
    mutated = mutate(jpeg_sample, data.draw(mutations(len(jpeg_sample))))
    size = data.draw(st.sampled_from([4, 16, 64]))
    out = np.zeros((size, size, 3), np.uint8)
    corner = st.floats(-50, 400, allow_nan=False)
    box = np.array([data.draw(corner), data.draw(corner), data.draw(corner), data.draw(corner)])
    try:
        decode_crop_into(mutated, box, data.draw(st.booleans()), out, region_decode=data.draw(st.booleans()),
                         reduced_decode=data.draw(st.booleans()))
    except DATA_EXCEPTIONS:
        pass


@FIXTURES
@given(data=st.data())
def test_mutated_image_shard_gives_samples_or_dataio_errors(coloured_shards, tmp_path_factory, data):
    folder, shard = mutated_copy(coloured_shards, "shard-*.tar", tmp_path_factory, data, data.draw(st.booleans()))
    try:
        count_tar_samples(shard)
    except DataioError:
        pass
    try:
        loader = ImageLoader(folder, batch_size=16, image_size=16, on_error="skip", num_workers=1)
        seen = sum(len(b.samples) for b in loader.batches())
        assert seen + len(loader.stats.errors) == 45  # every sample: read, or named as lost
        loader.close()
    except DataioError:
        pass


def _manifest_text(shards: Path) -> str:
    return (shards / MANIFEST_NAME).read_text()


@FIXTURES
@given(data=st.data())
def test_mutated_manifest_parses_or_raises_manifest_error(coloured_shards, data):
    text = _manifest_text(coloured_shards).encode()
    mutated = mutate(text, data.draw(mutations(len(text))))
    try:
        parse_manifest(mutated.decode("utf-8", errors="replace"))
    except DataioError:
        pass


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda children: st.lists(children) | st.dictionaries(st.text(), children), max_leaves=20)


@FIXTURES
@given(value=json_values, key=st.sampled_from(["shards", "num_samples", "version", "classes", "kind", "options"]))
def test_manifest_with_any_json_in_a_field_parses_or_raises(coloured_shards, value, key):
    data = json.loads(_manifest_text(coloured_shards))
    data[key] = value
    try:
        parse_manifest(json.dumps(data))
    except DataioError:
        pass


@FIXTURES
@given(data=st.data())
def test_mutated_token_shard_reads_or_raises_shard_error(text_shards, tmp_path_factory, data):
    folder, _ = mutated_copy(text_shards, "text-*.arrow", tmp_path_factory, data, keep_size=True)
    try:
        shards = TokenShards(folder)
    except DataioError:
        return
    for sample in range(len(shards)):  # views stay inside their buffers: nothing reads out of bounds
        assert len(shards.tokens(sample)) == shards.lengths[sample]


@FIXTURES
@given(data=st.data())
def test_splicer_and_rewriter_give_a_jpeg_none_or_a_value_error(jpeg_sample, data):
    """The restart-interval splicer (never an error: a cut or None) and the pack-time rewrite on damaged bytes."""
    if not REGION_DECODE:
        pytest.skip("dataio.formats.jpeg._jpeg_codec not built")
    from dataio.formats.jpeg import _jpeg_codec

    mutated = mutate(jpeg_sample, data.draw(mutations(len(jpeg_sample))))
    corner = st.integers(-50, 600)
    result = _jpeg_codec.splice(mutated, data.draw(corner), data.draw(corner), data.draw(corner), data.draw(corner))
    if result is not None:
        spliced, left, top = result
        assert left >= 0 and top >= 0 and spliced[:2] == b"\xff\xd8" and spliced[-2:] == b"\xff\xd9"
        assert len(spliced) <= len(mutated) + 2
    try:
        _jpeg_codec.add_restart_markers(mutated, data.draw(st.integers(-1, 70_000)))
    except ValueError:
        pass


@FIXTURES
@given(data=st.data())
def test_damage_check_agrees_with_the_decoder_and_the_packer(jpeg_sample, data):
    """check(), a whole-image decode_region and prepare_image agree on damaged data: whatever libjpeg
    warns about is refused by all three; what check() passes decodes and may be packed."""
    if not REGION_DECODE:
        pytest.skip("dataio.formats.jpeg._jpeg_codec not built")
    from dataio.formats.jpeg import _jpeg_codec
    from dataio.formats.images.image_prepare import ImagePrepareConfig, PreparedImage, prepare_image

    mutated = mutate(jpeg_sample, data.draw(mutations(len(jpeg_sample))), keep_size=data.draw(st.booleans()))
    try:
        _jpeg_codec.check(mutated)
        damaged = False
    except _jpeg_codec.CorruptJPEGError:
        damaged = True
    except ValueError:
        return  # not a decodable JPEG at all
    try:
        width, height = _jpeg_codec.header(mutated)
        if 0 < width * height <= 1 << 22:
            _jpeg_codec.decode_region(mutated, 0, 0, width, height, 1, bytearray(width * height * 4))
        decoded = True
    except _jpeg_codec.CorruptJPEGError:
        decoded = False
    except (ValueError, NotImplementedError):
        return
    assert decoded != damaged or width * height > 1 << 22
    prepared = prepare_image(mutated, ImagePrepareConfig(quality=data.draw(st.sampled_from([None, 90]))))
    if damaged:
        assert not isinstance(prepared, PreparedImage)


@FIXTURES
@given(raw=st.binary(min_size=1, max_size=80))
def test_any_file_name_escapes_to_one_utf8_line_and_back(raw):
    """Source names that are not UTF-8 (or hold newlines, backslashes, controls) are stored losslessly."""
    from dataio.formats.images.image_tree import escape_path, unescape_path

    text = escape_path(raw)
    assert "\n" not in text and "\r" not in text
    text.encode("utf-8")  # valid UTF-8, no lone surrogates
    assert unescape_path(text) == raw


@FIXTURES
@given(members=st.dictionaries(st.sampled_from(["jpg", "png", "cls", "json", "pyd", "pickle", "pth", "npy", "txt"]),
                               st.binary(max_size=64), min_size=1))
def test_shard_member_handlers_give_a_sample_or_a_data_error(members):
    """Any member bytes under any name: an image and label, or a data error; never an unpickle."""
    from dataio.formats.dataset.shard_members import decode_sample

    try:
        decode_sample({"__key__": "k", **members})
    except (DataioError, *DATA_EXCEPTIONS):
        pass


@FIXTURES
@given(data=st.data())
def test_mutated_parquet_source_converts_or_names_the_problem(tmp_path_factory, jpeg_sample, data):
    """A damaged Parquet file: a conversion with the bad rows listed, or one line naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from dataio.formats.errors import UsageError
    from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images

    folder = tmp_path_factory.mktemp("pq")
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"image": pa.array([{"bytes": jpeg_sample, "path": f"{i}.jpg"} for i in range(6)], image),
                      "label": pa.array([i % 2 for i in range(6)], pa.int64())})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=2)
    raw = sink.getvalue().to_pybytes()
    (folder / "d.parquet").write_bytes(mutate(raw, data.draw(mutations(len(raw))), keep_size=data.draw(st.booleans())))
    try:
        summary = convert_images(ConvertImagesConfig(src=folder / "d.parquet", out=folder / "out", num_workers=1,
                                                     progress=False))
        assert summary.num_samples + summary.num_rejected == 6
    except (UsageError, DataioError, pa.ArrowException, OSError):
        pass


def test_fuzz_inputs_exist(jpeg_sample):
    assert jpeg_sample[:2] == b"\xff\xd8" and io.BytesIO(jpeg_sample).getbuffer().nbytes > 100
    assert b"\xff\xdd" in jpeg_sample or not REGION_DECODE, "packed without restart markers: the splicer is not fuzzed"


@given(data=st.data())
def test_randaugment_kernel_with_any_plan_gives_an_image_or_a_value_error(data):
    """Any op codes and parameters (NaN, huge, out of range) on any small image: a result or ValueError."""
    from dataio.augment import cpu_kernel

    if not cpu_kernel.AVAILABLE:
        pytest.skip("dataio.augment._randaugment_cpu not built")
    n, height, width, num_ops = (data.draw(st.integers(lo, hi)) for lo, hi in ((1, 3), (3, 24), (3, 24), (0, 4)))
    images = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (n, 3, height, width), dtype=np.uint8))
    codes = np.array(data.draw(st.lists(st.integers(-2, 11), min_size=n * num_ops, max_size=n * num_ops)),
                     np.int32).reshape(n, num_ops)
    values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-3, 3), st.integers(-2, 10))
    params = np.array(data.draw(st.lists(values, min_size=6 * n * num_ops, max_size=6 * n * num_ops)),
                      np.float64).reshape(n, num_ops, 6)
    try:
        out = cpu_kernel.apply(images, codes, params, fill=data.draw(st.integers(0, 255)))
    except ValueError:
        return
    assert out.shape == images.shape and out.dtype == torch.uint8
