"""Issue 42 met by users' unmodified code patterns: other people's training scripts (pytorch/examples-style DDP,
nanoGPT) and data layouts common on clusters, run as users run them (torchrun, the CLI, exit codes, stderr).

Each test failed on issue 42's first cut and passed on the version before it: a correct job that the changes
refused, stalled or left without data; each passes now.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.sampling.rank_agreement import WAIT
from tests.conftest import NUM_COLOURED

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _run(command: list[str], cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    # run outside the clone, so that `python -m dataio` imports the installed library (this checkout's, or another
    # checkout's when the test is run with that venv's python)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=ENV)


def _records(out: Path) -> list[dict]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


# -- ranks: loaders matched by where they were built --------------------------------------------------------------

EVAL_SETS = ("imagenet-val", "imagenet-v2", "imagenet-real")  # PYTHONHASHSEED 0 and 1 iterate them in other orders


@pytest.fixture(scope="module")
def eval_root(coloured_folder, coloured_shards, tmp_path_factory) -> Path:
    """Three evaluation sets of other sizes: the 45 coloured images, their class c0 (15), classes c1 and c2 (30)."""
    root = tmp_path_factory.mktemp("evals")
    shutil.copytree(coloured_shards, root / "imagenet-val")
    for name, classes in (("imagenet-v2", ["c0"]), ("imagenet-real", ["c1", "c2"])):
        src = root / f"{name}-src"
        for c in classes:
            shutil.copytree(coloured_folder / c, src / c)
        convert_images(ConvertImagesConfig(src=src, out=root / name, max_shard_samples=7, num_workers=1,
                                           progress=False))
    return root


def test_evaluation_loaders_built_over_a_set_of_names_are_matched_by_name_not_by_build_order(
        coloured_shards, eval_root, tmp_path):
    # A pytorch/examples-style DDP script evaluates on several sets after each epoch, deduplicating the names the
    # command line gave with set(): `{name: DataLoader(root / name) for name in set(names)}`. Each Python process
    # draws its own string-hash seed, so each rank builds the same loaders in another order (here made
    # reproducible: PYTHONHASHSEED=LOCAL_RANK). Every rank's loaders["imagenet-v2"] reads the same folder with the
    # same settings: a correct job, and it ran before issue 42. Now loaders are matched by their construction line
    # and an ordinal among loaders built there, so rank 0's imagenet-val is compared with rank 1's imagenet-v2 and
    # every rank raises RanksDisagree ('a stale or partial copy of the data on some node'), exit 1.
    wrapper = ["--no-python", "sh", "-c", 'PYTHONHASHSEED=$LOCAL_RANK exec "$0" "$@"', sys.executable]
    done = _run(TORCHRUN + wrapper + [str(HERE / "imagenet_ddp_script.py"), str(coloured_shards),
                                      str(coloured_shards), str(tmp_path), "--epochs", "1",
                                      "--eval-root", str(eval_root), "--eval-sets", *EVAL_SETS], tmp_path)
    records = _records(tmp_path)
    assert records[0]["eval_order"] != records[1]["eval_order"], records  # the premise: the ranks' set orders differ
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RanksDisagree" not in done.stderr, done.stderr[-3000:]
    for name, size in (("imagenet-val", NUM_COLOURED), ("imagenet-v2", 15), ("imagenet-real", 30)):
        assert records[0]["eval"][name][0] + records[1]["eval"][name][0] >= size, (name, records)


# -- time: a correct job stalls --------------------------------------------------------------------------------------

def test_nanogpt_estimate_loss_on_the_master_process_does_not_stall_every_evaluation(text_shards, tmp_path):
    # nanoGPT's train.py evaluates on the master process alone (`if iter_num % eval_interval == 0 and
    # master_process: losses = estimate_loss()`), and estimate_loss reads eval_iters batches of each split; with
    # get_batch(split) swapped for a TextLoader made by a helper, each evaluation builds two loaders on rank 0 only.
    # Before issue 42 an evaluation took ~0.01-0.03 s here; now each of its loaders waits the 5 s for rank 1's
    # settings (which never come), so every evaluation takes 10 s while rank 1 idles at the next all-reduce:
    # 300 evaluations of a GPT-2 run (eval_interval 2000 of 600k iterations) would be 50 minutes of a whole
    # job's GPUs waiting. Nothing is printed (an info-level log line) to say why.
    done = _run(TORCHRUN + [str(HERE / "nanogpt_script.py"), str(text_shards), str(text_shards), str(tmp_path),
                            "--iters", "6", "--eval-interval", "3", "--eval-iters", "2"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    evals = _records(tmp_path)[0]["evals"]
    # Now: a place whose loader no other rank builds waits WAIT once (its loader's ranks could disagree, and every
    # rank must raise then, before any collective), never again: the first evaluation pays it once, the others not
    # (a rank-local loader passes world_size=1 and never waits: docs/distributed.md).
    assert len(evals) == 2
    assert evals[0] < 2 * WAIT + 2 and evals[1] < 2.0, f"master-only evaluations took {evals} s (before: ~0.02 s)"


# -- files: image folders made of links ------------------------------------------------------------------------------

def _class_folder_links(store: Path, src: Path) -> int:
    """An ImageNet-100-style subset: class folders linked from the full set (`ln -s /datasets/imagenet/train/c0`)."""
    src.mkdir(parents=True)
    for c in ("c0", "c2"):
        (src / c).symlink_to(store / c, target_is_directory=True)
    return 30


def _per_file_links(store: Path, src: Path) -> int:
    """A subset made file by file by a dataset tool (`cp -s`, a curation script): absolute links into the store."""
    for c in ("c0", "c1"):
        (src / c).mkdir(parents=True)
        for path in sorted((store / c).iterdir())[:5]:
            (src / c / path.name).symlink_to(path)
    return 10


def _hub_snapshot(store: Path, src: Path) -> int:
    """huggingface_hub's cache (`snapshot_download`): snapshots/REV/DIR/FILE links to ../../../blobs/HASH."""
    blobs = src.parent.parent / "blobs"
    blobs.mkdir(parents=True)
    count = 0
    for c in ("c0", "c1", "c2"):
        (src / c).mkdir(parents=True)
        for path in sorted((store / c).iterdir())[:4]:
            blob = blobs / f"{c}-{path.stem}"
            shutil.copyfile(path, blob)
            (src / c / path.name).symlink_to(Path("../../../blobs") / blob.name)  # from snapshots/REV/c
            count += 1
    return count


@pytest.mark.parametrize("layout", [_class_folder_links, _per_file_links, _hub_snapshot],
                         ids=["class-folder-links", "per-file-links", "hub-snapshot"])
def test_an_image_folder_of_links_into_a_shared_store_converts(layout, coloured_folder, tmp_path):
    # Clusters keep one copy of a data set (/datasets/imagenet) and users make subsets of links to it; the Hugging
    # Face cache is a folder of links into its blobs. `dataio convert images SUBSET OUT` packed them all before
    # issue 42 (and a root that is itself a link still converts). Now every image is rejected as 'a link out of
    # the source folder (to ...): not read', the command says 'no image converted', exit 1, and no option lets the
    # user say the store is theirs (the class folders' links are walked, docs/reliability.md, then each file in
    # them is refused).
    store = tmp_path / "store"
    shutil.copytree(coloured_folder, store)
    src = tmp_path / "subset" / "snapshots" / "rev"
    expected = layout(store, src)
    out = tmp_path / "out"
    done = _run([sys.executable, "-m", "dataio", "convert", "images", str(src), str(out)], tmp_path, timeout=120)
    assert done.returncode == 0, (done.stdout[-1500:], done.stderr[-1500:])
    assert f"packed {expected} images" in done.stdout + done.stderr, (done.stdout[-1500:], done.stderr[-1500:])
    assert (out / "rejected.jsonl").read_text() == ""
