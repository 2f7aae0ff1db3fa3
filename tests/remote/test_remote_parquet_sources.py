"""``dataio convert images`` from Hub Parquet files given as URLs (S3 on loopback, HTTPS-style range server): the same
shards, sample table, rejected rows and classes as a local copy of the files, on one rank or two, by range reads."""

from __future__ import annotations

import http.server
import io
import re
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from dataio.formats.errors import UsageError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.pairs.synthetic_pair_writers import write_hub_parquet
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.formats.test_parquet_images import _jpeg, _write, hub_repo_files
from tests.remote.conftest import RangeHandler
from tests.remote.remote_source_helpers import cli, loads, mirrored, one_line, outputs_of

COMMON = dict(shard_size="20KB", num_workers=1, progress=False)


def _classification_repo(folder: Path) -> Path:
    """A Hub repository: ``data/train-0000{0,1}-of-00002.parquet``, labels named in the features, a few bad rows."""
    hub_repo_files(folder / "data", cmyk=False)
    return folder


def _convert(src, out: Path, world: int, **options) -> dict:
    """``src`` converted on ``world`` ranks (the last one merges), and what must match between copies."""
    for rank in range(world):
        ranks = dict(rank=rank, world_size=world) if world > 1 else {}
        convert_images(ConvertImagesConfig(src=src, out=out, **ranks, **COMMON, **options))
    return outputs_of(out)


@pytest.mark.parametrize("form, world", [("glob", 1), ("glob", 2), ("folder", 2), ("file", 1)])
def test_hub_parquet_on_s3_packs_as_its_local_copy(s3, tmp_path, form, world):
    url = mirrored(s3, _classification_repo(tmp_path / "repo"), tmp_path / "local")
    local, remote = {"glob": (tmp_path / "local/data/train-*.parquet", f"{url}/data/train-*.parquet"),
                     "folder": (tmp_path / "local", url),
                     "file": (tmp_path / "local/data/train-00001-of-00002.parquet",
                              f"{url}/data/train-00001-of-00002.parquet")}[form]
    expected = _convert(local, tmp_path / "from-local", world)
    got = _convert(remote, tmp_path / "from-s3", world, storage_options=s3.options())
    assert got == expected
    assert list(got["classes"]) == ["tench", "goldfish", "great white shark"]  # from the features metadata
    reasons = {row["path"] for row in loads(got["rejected"])}
    assert {"train-00001-of-00002.parquet#1", "train-00001-of-00002.parquet#4"} <= reasons  # FILE#ROW ids
    if world == 2:
        assert (tmp_path / "from-s3" / "rank-00001-of-00002").is_dir()


@pytest.mark.parametrize("form, world", [("glob", 2), ("folder", 1)])
def test_hub_caption_parquet_on_s3_packs_as_its_local_copy(s3, tmp_path, form, world):
    config = SyntheticPairsConfig(count=20, samples_per_shard=8, bad_pairs=("missing_caption", "truncated_image", "huge_caption"))
    write_hub_parquet(tmp_path / "repo", config, caption_column="text")
    url = mirrored(s3, tmp_path / "repo", tmp_path / "local")
    local, remote = ((tmp_path / "local/data/train-*.parquet", f"{url}/data/train-*.parquet") if form == "glob"
                     else (tmp_path / "local", url))
    pairs = dict(kind="pairs", captions=True, caption_column="text")
    expected = _convert(local, tmp_path / "from-local", world, **pairs)
    got = _convert(remote, tmp_path / "from-s3", world, storage_options=s3.options(), **pairs)
    assert got == expected and got["num_samples"] >= 15 and len(loads(got["rejected"])) >= 2


def _noise_repo(folder: Path) -> Path:
    """One Parquet file of 32 noisy PNGs (~12 KB each) in row groups of 4: larger than the 64 KB pyarrow reads for
    a footer, so the row groups of another rank lie outside it."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(32):
        out = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(out, "PNG")
        rows.append((out.getvalue(), i % 3, f"noise{i}.png"))
    folder.mkdir(parents=True)
    _write(folder / "train-00000-of-00001.parquet", rows)
    return folder / "train-00000-of-00001.parquet"


class _RangesSeen(RangeHandler):
    """The range server, noting each GET's range (a GET without one is noted as "whole")."""

    gets: list[str] = []

    def do_GET(self) -> None:
        type(self).gets.append(self.headers.get("Range") or "whole")
        super().do_GET()


def test_a_parquet_url_over_https_packs_as_local_reading_only_its_ranks_row_groups(tmp_path):
    path = _noise_repo(tmp_path / "srv")
    handler = lambda *a, **k: _RangesSeen(*a, directory=str(path.parent), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{path.name}"
        assert _convert(url, tmp_path / "from-http", 1) == _convert(path, tmp_path / "from-local", 1)
        _RangesSeen.gets.clear()
        convert_images(ConvertImagesConfig(src=url, out=tmp_path / "rank0", rank=0, world_size=2, **COMMON))
        gets = list(_RangesSeen.gets)
    finally:
        server.shutdown()
        server.server_close()
    assert gets and "whole" not in gets
    fetched = [tuple(int(x) for x in get[len("bytes="):].split("-")) for get in gets]
    metadata, size = pq.ParquetFile(path).metadata, path.stat().st_size
    # rank 1's last row groups: their image chunks before the footer's 64 KB are never fetched by rank 0
    chunks = [metadata.row_group(group).column(0) for group in range(metadata.num_row_groups // 2 + 1,
                                                                      metadata.num_row_groups)]
    starts = [chunk.dictionary_page_offset or chunk.data_page_offset for chunk in chunks]  # pyarrow's dictionary first
    unread = [(start, start + chunk.total_compressed_size - 1) for start, chunk in zip(starts, chunks, strict=True)
              if start + chunk.total_compressed_size < size - (64 << 10)]
    assert unread
    assert not [(a, b) for a, b in fetched for c, d in unread if a <= d and c <= b]
    assert sum(b - a + 1 for a, b in fetched) < 4 * size  # footers read once per pass, no read-ahead


def test_a_missing_parquet_object_or_an_empty_glob_is_one_line(s3, tmp_path):
    url = mirrored(s3, _classification_repo(tmp_path / "repo"), tmp_path / "local")
    missing = cli(s3, "convert", "images", f"{url}/data/gone.parquet", str(tmp_path / "o1"), "--no-progress")
    assert missing.returncode == 2 and f"{url}/data/gone.parquet: no such object" in one_line(missing)
    with pytest.raises(UsageError, match=re.escape(f"{url}/data/test-*.parquet: no .parquet files match")):
        _convert(f"{url}/data/test-*.parquet", tmp_path / "o2", 1, storage_options=s3.options())


def test_a_path_only_row_of_a_parquet_url_is_rejected_and_its_path_never_read(s3, tmp_path):
    import pyarrow as pa

    on_disk = tmp_path / "on-disk.jpg"
    on_disk.write_bytes(_jpeg(0, 1))  # a real image at the path the row names: still not read
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"image": pa.array([{"bytes": _jpeg(1, 0), "path": "a.jpg"},
                                         {"bytes": None, "path": str(on_disk)}], image_type),
                      "label": pa.array([1, 0])})
    (tmp_path / "repo").mkdir()
    pq.write_table(table, tmp_path / "repo" / "train-00000-of-00001.parquet")
    url = mirrored(s3, tmp_path / "repo", tmp_path / "local")
    got = _convert(f"{url}/train-00000-of-00001.parquet", tmp_path / "out", 1, storage_options=s3.options())
    rejected = loads(got["rejected"])
    assert got["num_samples"] == 1 and [row["path"] for row in rejected] == ["train-00000-of-00001.parquet#1"]
    assert "is not read: a Parquet file given as a URL must hold its images' bytes" in rejected[0]["reason"]
