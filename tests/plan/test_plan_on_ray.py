"""The Ray engine in-process (this process a driver of the worker's Ray head, ``ray_head``, for the module): each
kind's planned conversion holds the one-process conversion's samples, labels, checksums, fields and rejected
list, and a rerun redoes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.errors import UsageError
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.plan.plan_driver import PlanOutcome, plan_of, run_plan
from dataio.formats.plan.plan_kinds import PlanRequest
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig

ray = pytest.importorskip("ray", reason="the ray extra is part of the test extra")
from dataio.formats.plan.ray_engine import RayOptions, run_on_ray  # noqa: E402
from tests.cluster.ray_head import driver_env  # noqa: E402

PLACED = ("key", "shard", "offset", "size", "order_shard")  # where a sample lies: shards differ, samples do not


@pytest.fixture(scope="module", autouse=True)
def ray_here(ray_head):
    """Connected to ``ray_head`` for the module, then ``ray.shutdown()`` and the environment as it was: the
    worker's next tests (a ``ray.init()`` of their own, a CLI driver) find no connection and no RAY_ADDRESS."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in driver_env({}).items():
            patch.setenv(name, value)
        for name in ("RAY_ADDRESS", "RAY_AUTH_TOKEN"):
            patch.delenv(name, raising=False)
        ray.init(address=ray_head.address, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()


def planned(kind: str, config, out: Path, items: int, staging: Path, overwrite: bool = False) -> PlanOutcome:
    request = PlanRequest(out=str(out), items=items, cluster_cpus=2, staging=str(staging))
    said: list[str] = []
    outcome = run_plan(plan_of(kind, config, request), lambda work, say: run_on_ray(work, RayOptions(), say),
                       overwrite=overwrite, say=said.append)
    assert len([line for line in said if " done " in line or "already done" in line]) == items, said
    return outcome


def table(folder: Path) -> dict[str, list]:
    data = pa.ipc.open_file(str(folder / "samples.arrow")).read_all()
    return {name: data.column(name).to_pylist() for name in data.schema.names
            if name not in PLACED and not name.endswith(("_offset", "_size"))}  # a member's place in its shard


def same_dataset(one: Path, many: Path) -> None:
    """The same samples in the same order, labels, checksums, declared fields and rejected list."""
    (_, a), (_, b) = read_manifest(one), read_manifest(many)
    assert (a.num_samples, a.num_rejected, a.classes, a.fields, a.sample_kind) == \
        (b.num_samples, b.num_rejected, b.classes, b.fields, b.sample_kind)
    assert table(one) == table(many)
    merged, single = (pa.ipc.open_file(str(f / "samples.arrow")).read_all() for f in (many, one))
    assert merged["order_shard"].to_pylist() == single["shard"].to_pylist()  # the shuffle's: one process's shards
    rejected = [(f / "rejected.jsonl").read_text() if (f / "rejected.jsonl").is_file() else "" for f in (one, many)]
    assert rejected[0] == rejected[1]


def test_images_with_rejected_files_on_three_items_equal_one_process(image_folder, tmp_path):
    config = ConvertImagesConfig(src=image_folder[0], out=tmp_path / "one", num_workers=1, progress=False)
    convert_images(config)
    outcome = planned("images", config, tmp_path / "ray", 3, tmp_path / "staging")
    same_dataset(tmp_path / "one", tmp_path / "ray")
    rejected = (tmp_path / "ray" / "rejected.jsonl").read_text().splitlines()
    assert rejected and len(rejected) == len(set(rejected))  # each listed once
    assert [r.skipped for r in outcome.results] == [False] * 3
    manifest = (tmp_path / "ray" / "manifest.json").read_bytes()
    with pytest.raises(UsageError, match="not empty"):  # a finished OUT, as one process refuses it
        planned("images", config, tmp_path / "ray", 3, tmp_path / "staging")
    (tmp_path / "ray" / "manifest.json").unlink()  # a driver that died after its items, before its merge
    again = planned("images", config, tmp_path / "ray", 3, tmp_path / "staging")
    assert [r.skipped for r in again.results] == [True] * 3
    assert (tmp_path / "ray" / "manifest.json").read_bytes() == manifest
    (tmp_path / "ray" / "manifest.json").unlink()  # unmerged again: parts of a plan, and another plan asked for
    with pytest.raises(UsageError, match="another plan"):  # other items: never parts of two plans merged
        planned("images", config, tmp_path / "ray", 2, tmp_path / "staging")
    planned("images", config, tmp_path / "ray", 2, tmp_path / "staging", overwrite=True)
    same_dataset(tmp_path / "one", tmp_path / "ray")


def test_pairs_coco_and_text_equal_one_process(coco_folder, text_corpus, tmp_path):
    captions = tmp_path / "captions"
    write_caption_folder(captions, SyntheticPairsConfig(count=12, seed=5))
    pairs = ConvertImagesConfig(src=captions, out=tmp_path / "pairs1", captions=True, num_workers=1, progress=False)
    convert_images(pairs)
    planned("images", pairs, tmp_path / "pairs", 3, tmp_path / "staging")
    same_dataset(tmp_path / "pairs1", tmp_path / "pairs")

    coco = ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=tmp_path / "coco1",
                             num_workers=1, progress=False)
    convert_coco(coco)
    planned("coco", coco, tmp_path / "coco", 3, tmp_path / "staging")
    same_dataset(tmp_path / "coco1", tmp_path / "coco")
    assert read_manifest(tmp_path / "coco")[1].options["categories"] == read_manifest(tmp_path / "coco1")[1].options["categories"]

    text = ConvertTextConfig(sources=(text_corpus,), out=tmp_path / "text1", max_length=96, shard_tokens=4000,
                             tokenizer=TokenizerConfig(train="bpe", vocab_size=600), progress=False)
    convert_text(text)
    planned("text", text, tmp_path / "text", 3, tmp_path / "staging")
    assert _token_rows(tmp_path / "text1") == _token_rows(tmp_path / "text")
    assert (tmp_path / "text1" / "tokenizer.json").read_bytes() == (tmp_path / "text" / "tokenizer.json").read_bytes()


def _token_rows(folder: Path) -> list:
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = []
    for shard in manifest["shards"]:
        rows += pa.ipc.open_file(str(folder / shard["file"])).read_all().column(0).to_pylist()
    return rows
