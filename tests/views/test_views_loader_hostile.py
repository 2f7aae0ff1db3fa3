"""ViewsLoader over hostile folders: a sample table that lies about sizes or carries undeclared labels, images PIL
reads differently from the packer and DALI, batch hooks that drop view rows, mixtures of kinds."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest
import torch
from PIL import Image

import dataio
from dataio.augment.view_params import ViewRecipe
from dataio.errors import ConfigError, DataioError, SampleError
from dataio.formats.images.wds_index import IndexConfig, index_shards
from tests.hostile_helpers import copy_folder, rewrite_table, run_cli, scale_sizes, views_folder, write_pair_tar

PLAIN = ViewRecipe(jitter=0.0, grayscale=0.0, blur=0.0, solarize=0.0)
VIEWS = dataio.ViewsConfig(global_size=32, local_size=16, local_crops=2, global_recipes=(PLAIN,), local_recipe=PLAIN)


def _loader(folder, **options):
    return dataio.ViewsLoader(folder, views=options.pop("views", VIEWS),
                              **{"batch_size": 8, "seed": 0, "num_workers": 1, "shuffle": False, **options})


# Class 5 (silently wrong): a sample table whose width/height are not the image's (a stale or altered table; verify
# --deep names it: "the sample table gives its size as 5000x4000, the image is 500x400") is read by ViewsLoader
# without a word: the views' boxes are drawn in the table's size and clamped to the image, so most views of that
# sample are a 1-pixel strip stretched to 32 px. The detection kind checks sizes (check_sizes); view_decode has the
# expect_size parameter, but view_batches never passes it. The sample should be a named SampleError under `raise`.
def test_an_image_of_another_size_than_its_table_row_is_named(views_shards, tmp_path):
    folder = copy_folder(views_shards, tmp_path / "out")
    rewrite_table(folder, scale_sizes([5], 10))
    with pytest.raises(SampleError, match="size"):
        with _loader(folder) as loader:
            list(loader)


# Class 4 (one bad item costs others) / 8: the same stale row read with decoder="dali" makes DALI's trimmed slices
# differ in shape; `out.as_array()` in view_dali._run raises RuntimeError ("Assert on tl.IsDenseTensor() failed ...")
# outside the try that bisects a failing batch, so it is not a sample error: on_error="skip" ends the whole pass.
def test_dali_views_of_a_stale_row_skip_that_sample_only(views_shards, tmp_path):
    pytest.importorskip("nvidia.dali")
    folder = copy_folder(views_shards, tmp_path / "out")
    rewrite_table(folder, scale_sizes([5], 10))
    with _loader(folder, decoder="dali", on_error="skip") as loader:
        seen = [i for batch in loader for i in batch["sample_ids"].tolist()]
    assert set(seen) >= set(range(45)) - {5}


# Class 5: batch_transform may change values, not the rows: check_rows refuses a `label` one row short, but the view
# fields (STACKED in view_finish.py) are exempt from any check, though their row count is known (views x N): a hook
# that drops one row of collated_global_crops (7 rows for 4 samples x 2 views), or returns N rows instead of 2N, is
# passed on, and the view-major layout no longer matches sample_ids.
@pytest.mark.parametrize("cut", [lambda g, n: g[1:], lambda g, n: g[:n]], ids=["one-row-short", "one-view-only"])
def test_a_batch_transform_that_drops_view_rows_is_refused(views_shards, cut):
    def hook(batch):
        n = len(batch["sample_ids"])
        return {**batch, "collated_global_crops": cut(batch["collated_global_crops"], n)}

    with pytest.raises(ConfigError, match="collated_global_crops"):
        with _loader(views_shards, batch_transform=hook, batch_size=4) as loader:
            list(loader)


def _with_labels(table: pa.Table) -> pa.Table:
    labels = pa.array([10**9 if i % 2 else -5 for i in range(len(table))], pa.int32())
    return table.append_column("label", labels)


# Class 3 (trusted as it is) / 5: a views folder (no classes, no declared label) whose sample table carries a `label`
# column of 10**9 and -5: ViewsLoader yields them as batch["label"], ShardDataset as each item's label, and
# `dataio verify --deep` says OK. A classification folder's out-of-range labels are named per sample; here the
# column is not even declared. It should be refused (or at least never handed out as labels).
def test_an_undeclared_label_column_of_a_views_folder_is_not_handed_out(views_shards, tmp_path):
    folder = copy_folder(views_shards, tmp_path / "out")
    rewrite_table(folder, _with_labels)
    try:
        with _loader(folder) as loader:
            batch = next(iter(loader))
    except DataioError as e:
        assert "label" in str(e)
        return
    assert "label" not in batch, f"labels of a folder without classes: {batch['label'].tolist()}"


def test_verify_names_an_undeclared_label_column_of_a_views_folder(views_shards, tmp_path):
    folder = copy_folder(views_shards, tmp_path / "out")
    rewrite_table(folder, _with_labels)
    result = run_cli("verify", "--deep", str(folder), cwd=tmp_path)
    assert result.returncode == 1 and "label" in result.stdout + result.stderr, result.stdout + result.stderr


# Class 5: a 16-bit grayscale PNG (value 30000 of 65535: level 117) stored as it is (`dataio index` keeps members'
# bytes) is read by the views' PIL path (view_decode._whole_views: image.convert("RGB")) as 255, pure white; DALI
# reads 117, and `convert images --kind views` packs the same file as 117. The turbo/PIL views should agree.
def test_a_16_bit_png_gives_the_views_its_level(tmp_path):
    buffer = io.BytesIO()
    Image.fromarray(np.full((30, 40), 30000, np.uint16)).save(buffer, "PNG")
    jpeg = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 200, 90)).save(jpeg, "JPEG", quality=95)
    folder = write_pair_tar(tmp_path / "tars", {"000": ("png", buffer.getvalue()), "001": ("jpg", jpeg.getvalue())})
    index_shards(IndexConfig(shards=(folder,), num_workers=1, progress=False))
    with _loader(folder, decoder="turbo") as loader:
        batch = next(iter(loader))
    row = batch["sample_ids"].tolist().index(0)
    level = float(batch["collated_global_crops"][row].float().mean())
    assert abs(level - 30000 / 257) < 3, f"16-bit PNG read as level {level:.0f}, not {30000 / 257:.0f}"


# Docs contract (docs/views.md: "Any image folder dataio reads can be read as views, a classification folder
# included", mixtures of folders): ViewsLoader reads a classification folder and a views folder each alone, but
# ViewsLoader({"imagenet": classification, "raw": views}) - DINOv2's curated + uncurated set - is refused: "a
# mixture's sources must all be one kind". The face reads both as views.
def test_a_views_mixture_of_a_classification_and_a_views_folder(coloured_shards, views_shards):
    with _loader({"labelled": coloured_shards, "raw": views_shards}, weights={"labelled": 1, "raw": 1}) as loader:
        seen = sum(len(batch["sample_ids"]) for batch in loader)
    assert seen == 90
