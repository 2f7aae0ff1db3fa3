"""open_clip's own tokenizer and transformers' fast tokenizers as users hold them, at pack and read time, each
checked against the client's own output (in a subprocess: the pytest process never imports them).

Before: both were refused (``CaptionConfig``: "must be a tokenizers JSON file or a tokenizers.Tokenizer";
``TokenizerConfig`` took a file or ``train`` only), and storing CLIP's ids took a 25-line conversion to a
``tokenizers`` JSON, knowing open_clip's token names and that its padding is id 0."""

from __future__ import annotations

import json
import os

import pyarrow as pa

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.clients.conftest import HERE, run_client
from tests.hostile_helpers import one_line_refusal
from tests.pairs.tokenizer_makers import bert_style_tokenizer

CLIP_SOT, CLIP_EOT = 49406, 49407  # open_clip's SimpleTokenizer: start and end of text, its largest ids


def dataio_cli(args: list[str], env: dict[str, str], cwd):
    return run_client(["-m", "dataio", *args], {**env, "DATAIO_NUM_WORKERS": "1"}, cwd)


def stored_ids(folder) -> list[list[int]]:
    return pa.ipc.open_file(folder / "samples.arrow").read_all().column("input_ids").to_pylist()


def test_open_clip_and_transformers_tokenizers_pack_and_read_exactly_their_own_ids(client_env, tmp_path):
    bert_style_tokenizer(tmp_path / "bert.json")
    done = run_client([str(HERE / "tokenizer_client_script.py"), str(tmp_path), str(tmp_path / "bert.json")],
                      client_env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.split() == ["OK", "open_clip", "stored", "OK", "open_clip", "read", "OK", "transformers",
                                   "stored", "OK", "transformers", "read"], done.stdout
    # the CLI's names for them store the same ids as the Python API did
    pairs = SyntheticPairsConfig(count=10, samples_per_shard=5, failed_fraction=0.0, seed=3)
    for name, api in (("open_clip:ViT-B-32", "clip"), (f"hf:{tmp_path / 'hf_dir'}", "hf")):
        folder = tmp_path / f"cli_{api}"
        write_img2dataset(folder, pairs)
        done = dataio_cli(["index", str(folder), "--tokenizer", name, "--no-progress"], client_env, tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert stored_ids(folder) == stored_ids(tmp_path / api), name
    record = json.loads((tmp_path / "cli_clip" / "manifest.json").read_text())["options"]["tokenizer"]
    assert record["source"] == "open_clip:SimpleTokenizer" and record["file"] is None
    assert (record["bos_id"], record["eos_id"], record["pad_id"], record["vocab_size"]) == (CLIP_SOT, CLIP_EOT, 0,
                                                                                          CLIP_EOT + 1)
    assert all(row[0] == CLIP_SOT and row[-1] == CLIP_EOT for row in stored_ids(tmp_path / "cli_clip"))
    assert not (tmp_path / "cli_clip" / "tokenizer.json").exists()  # nothing to save: the source names it


def test_a_named_tokenizer_the_cli_cannot_load_is_one_line(client_env, tmp_path):
    folder = tmp_path / "tars"
    write_img2dataset(folder, SyntheticPairsConfig(count=4, samples_per_shard=4, failed_fraction=0.0, seed=3))
    done = dataio_cli(["index", str(folder), "--tokenizer", "hf:no_such_folder", "--no-progress"], client_env,
                      tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 2 and "hf:no_such_folder" in err and "not a folder" in err, err
    bare = {**os.environ, "DATAIO_NUM_WORKERS": "1"}  # open_clip lives in .venv/clients, off this path
    done = run_client(["-m", "dataio", "index", str(folder), "--tokenizer", "open_clip:ViT-B-32", "--no-progress"],
                      bare, tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 2 and "open_clip_torch is not installed" in err, err
    assert not (folder / "manifest.json").exists()
