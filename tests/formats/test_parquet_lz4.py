"""Hub Parquet captions read page by page (issue 42, "Rows"): docs/reliability.md says a snappy or lz4-raw page
"is decompressed whole only up to 64 MiB". A file written by pyarrow with ``compression="lz4_raw"`` (or the
default ``"lz4"``, the same codec) whose row group holds one 2 MiB caption loses its whole row group: every row
is rejected with ``pages compressed by LZ4, which are not read page by page``. ``formats/parquet_values.py`` keys
its whole-page codecs on ``"LZ4_RAW"``, but pyarrow's ``ColumnChunkMetaData.compression`` calls that codec
``"LZ4"``, so the lz4-raw path never runs. Should: like snappy, only the long caption's row rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.formats.test_pair_rows import jpeg, packed_captions
from tests.hostile_helpers import run_cli


def hub(tmp_path: Path, **layout) -> list:
    captions: list = [f"caption {i} " * (i + 1) for i in range(12)]
    captions[4] = "y" * (2 << 20)  # past the chunk threshold: the first row group is read page by page
    table = pa.table({"image": pa.array([{"bytes": jpeg((i * 20, 40, 40)), "path": f"{i}.jpg"} for i in range(12)]),
                      "caption": pa.array(captions, pa.string())})
    (tmp_path / "hub").mkdir()
    pq.write_table(table, tmp_path / "hub" / "train-00000-of-00001.parquet", row_group_size=6, **layout)
    return captions


@pytest.mark.parametrize("layout", [dict(compression="lz4_raw"), dict(compression="lz4_raw", use_dictionary=False),
                                    dict(compression="snappy")],  # snappy: the control, holds now
                         ids=["lz4_raw-dictionary", "lz4_raw-plain", "control-snappy"])
def test_a_long_caption_in_an_lz4_raw_row_group_costs_only_its_own_row(tmp_path, layout):
    captions = hub(tmp_path, **layout)
    done = run_cli("convert", "images", "hub", "out", "--caption-column", "caption", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()]
    assert {line["path"] for line in lines} == {"train-00000-of-00001.parquet#4"}, lines[:3]
    assert done.stdout.startswith("packed 11 image-text pairs"), done.stdout
    assert packed_captions(tmp_path / "out") == sorted(c for i, c in enumerate(captions) if i != 4)
