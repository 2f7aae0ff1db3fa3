"""The pair benchmark's baseline (open_clip's pipeline shape over img2dataset tars), run as a script would run it.

Only the CLI imports ``dataio.bench`` (tests/test_layout.py): the test runs the baseline in a subprocess, as
``dataio bench pairs`` does in its process (tests/test_cli_bench_demo.py runs that command).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import BAD_PAIRS, SyntheticPairsConfig, make_pair
from dataio.formats.text.tokenizer_setup import TokenizerConfig, train_bpe

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = """
import json, sys
from pathlib import Path
from dataio.bench.pair_baselines import img2dataset_tars, make_open_clip_style
folder, tokenizer, normalize = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "normalize"
epoch = make_open_clip_style(img2dataset_tars(folder), batch_size=8, size=32, num_workers=2, tokenizer=tokenizer,
                             context_length=40, normalize=normalize)
passes = []
for _ in range(2):
    keys, shapes, counted, lengths, pads = [], set(), 0, [], set()
    for batch in epoch.batches():
        keys += batch["key"]
        counted += epoch.count(batch)
        shapes.add((tuple(batch["image"].shape[1:]), str(batch["image"].dtype), tuple(batch["input_ids"].shape[1:]),
                    str(batch["input_ids"].dtype), tuple(batch["attention_mask"].shape[1:])))
        lengths += batch["attention_mask"].sum(1).tolist()
        pads.update(batch["input_ids"][batch["attention_mask"] == 0].tolist())
    passes.append({"keys": keys, "counted": counted, "shapes": sorted(shapes), "lengths": lengths, "pads": sorted(pads),
                   "mean": batch["image"].float().mean().item(), "workers": len(epoch.worker_pids())})
epoch.close()
print(json.dumps(passes))
"""


@pytest.fixture(scope="module")
def tars(tmp_path_factory) -> tuple[Path, Path, dict[str, str], dict[str, str]]:
    """40 pairs in 4 img2dataset tars, 10% failed downloads and one of each bad pair; a BPE tokenizer of captions."""
    root = tmp_path_factory.mktemp("pairs")
    config = SyntheticPairsConfig(count=40, samples_per_shard=10, failed_fraction=0.1, bad_pairs=BAD_PAIRS)
    written = write_img2dataset(root / "tars", config)
    tokenizer = train_bpe([make_pair(i, config).caption for i in range(40)], TokenizerConfig(train="bpe",
                                                                                             vocab_size=400))
    tokenizer.save(str(root / "tokenizer.json"))
    return root / "tars", root / "tokenizer.json", written.captions, written.bad


def _epochs(folder: Path, tokenizer: Path, normalize: bool) -> tuple[list[dict], str]:
    done = subprocess.run([sys.executable, "-c", EPOCHS, str(folder), str(tokenizer),
                           "normalize" if normalize else "uint8"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr


def test_open_clip_style_baseline_reads_every_good_pair_once_per_epoch(tars):
    folder, tokenizer, captions, bad = tars
    passes, stderr = _epochs(folder, tokenizer, normalize=True)
    kept = {key for key, kind in bad.items() if kind in ("huge_caption", "json_not_json")}  # it reads no .json
    for one in passes:
        assert sorted(one["keys"]) == sorted(set(captions) | kept) and one["counted"] == len(one["keys"])
        assert one["shapes"] == [[[3, 32, 32], "torch.float32", [40], "torch.int64", [40]]]
        assert one["workers"] == 2
        assert -5 < one["mean"] < 5  # ToTensor + Normalize: within a few units of zero (a bright batch: 1.57), not 0..255
        assert min(one["lengths"]) < max(one["lengths"]) == 40 and one["pads"] == [0]  # short captions padded
        # with <pad> (id 0), the 1 MB one truncated
    assert passes[0]["keys"] != passes[1]["keys"] or len(passes[0]["keys"]) < 2  # shuffled anew each epoch
    for kind in ("caption_not_utf8", "empty_caption", "missing_caption", "missing_image", "truncated_image"):
        key = next(k for k, v in bad.items() if v == kind)
        assert key in stderr  # skipped with a warning naming the sample, as open_clip's log_and_continue


def test_without_normalize_it_hands_out_uint8(tars):
    folder, tokenizer, captions, _ = tars
    passes, _ = _epochs(folder, tokenizer, normalize=False)
    assert passes[0]["shapes"][0][:2] == [[3, 32, 32], "torch.uint8"]
    assert passes[0]["mean"] > 10
