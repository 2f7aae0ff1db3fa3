"""`dataio bench views SRC` on a SRC that is not a folder of photos."""

from __future__ import annotations

from pathlib import Path

from tests.hostile_helpers import copy_folder, one_line_refusal, run_cli

QUICK = ["--photos", "4", "--photo-class", "small", "--epochs", "1", "--warmup", "0", "--batch-size", "2"]


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# Class 8 ("nothing written into a user's source folder before refusing"): SRC is a shard folder (what every other
# reader of dataio takes). It holds no *.jpg, so bench/views_bench.prepare "generates" --photos photos INTO it
# (4 class folders beside manifest.json and the shards), packs them into SRC-views and benchmarks those synthetic
# photos, exit 0. Asked for a shard folder, it should refuse in one line (or read its images), writing nothing there.
def test_bench_views_of_a_shard_folder_writes_nothing_into_it(coloured_shards, tmp_path):
    shards = copy_folder(coloured_shards, tmp_path / "shards")  # the session's fixture must stay as it is
    before = _listing(shards)
    result = run_cli("bench", "views", str(shards), *QUICK, "--out", str(tmp_path / "results"), cwd=tmp_path,
                     timeout=300)
    assert _listing(shards) == before, "bench views wrote into the shard folder"
    if result.returncode != 0:
        one_line_refusal(result)


# Class 8: SRC holds the user's files, none of them images (notes, a CSV): the bench writes its 4 class folders of
# generated photos among them, and a SRC-views folder beside. It should refuse in one line (SRC holds no images).
def test_bench_views_of_a_folder_without_images_refuses_and_writes_nothing(tmp_path):
    src = tmp_path / "mine"
    src.mkdir()
    (src / "notes.txt").write_text("mine\n")
    (src / "table.csv").write_text("a,b\n1,2\n")
    result = run_cli("bench", "views", str(src), *QUICK, "--out", str(tmp_path / "results"), cwd=tmp_path,
                     timeout=300)
    assert _listing(src) == ["notes.txt", "table.csv"]
    assert not (tmp_path / "mine-views").exists()
    one_line_refusal(result)
