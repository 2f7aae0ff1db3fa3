"""One tokenizer, one encoding: what ``dataio index`` stores is what the loader's decode threads give with the same
tokenizer, and a trained vocabulary's EOS is its largest id, where CLIP-style towers pool.

Before: ``index --tokenizer FILE`` encoded without the file's post-processor and framed with ``<s>``/``</s>``
(a BERT-style file, ``[CLS] $A [SEP]``, was refused for lacking ``<s>``; one with ``$A </s>`` stored
``<s> ... </s>`` while reading gave ``... </s>``), and ``--train-tokenizer bpe`` put the EOS at id 2, so
open_clip's ``text.argmax(dim=-1)`` pooled a word in every row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from tokenizers import Tokenizer

from dataio import PairLoader
from dataio.pairs.caption_config import CaptionConfig
from tests.hostile_helpers import one_line_refusal, run_cli
from tests.pairs.test_tokenizer_packing import tars
from tests.pairs.tokenizer_makers import bert_style_tokenizer, word_tokenizer


def stored(folder: Path) -> tuple[list[str], list[list[int]]]:
    table = pa.ipc.open_file(folder / "samples.arrow").read_all()
    return table.column("caption").to_pylist(), table.column("input_ids").to_pylist()


def read_rows(folder: Path, tokenizer) -> dict[str, list[int]]:
    """Each caption's ids as the loader gives them, tokenising on its decode threads with ``tokenizer``."""
    captions = CaptionConfig(tokenizer=tokenizer, text=True, max_length=None)
    out = {}
    for batch in PairLoader(folder, batch_size=4, image_size=16, shuffle=False, captions=captions):
        for caption, ids, mask in zip(batch["caption"], batch["input_ids"], batch["attention_mask"], strict=True):
            out[caption] = ids[mask == 1].tolist()
    return out


def test_index_with_a_files_own_post_processor_stores_what_reading_that_file_gives(tmp_path):
    folder = tars(tmp_path / "tars")
    path = bert_style_tokenizer(tmp_path / "bert.json")
    done = run_cli("index", str(folder), "--tokenizer", "bert.json", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # was: "has no BOS token '<s>'"
    captions, rows = stored(folder)
    own = Tokenizer.from_file(str(path))
    assert rows == [own.encode(caption).ids for caption in captions]  # [CLS] ... [SEP], the file's framing
    assert read_rows(folder, path) == dict(zip(captions, rows, strict=True))
    record = json.loads((folder / "manifest.json").read_text())["options"]["tokenizer"]
    assert (record["bos_id"], record["eos_id"]) == (own.token_to_id("[CLS]"), own.token_to_id("[SEP]"))
    assert record["pad_id"] == own.token_to_id("[SEP]")  # no <pad>: the EOS pads, as --pad's help says
    assert read_rows(folder, folder / "tokenizer.json") == dict(zip(captions, rows, strict=True))


def test_a_file_ending_with_its_own_eos_is_stored_as_it_encodes_and_as_it_is_read(tmp_path):
    folder = tars(tmp_path / "tars")
    word_tokenizer(tmp_path / "ended.json", end=True)  # "$A </s>": no <s>, which --bos used to add
    done = run_cli("index", str(folder), "--tokenizer", "ended.json", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    captions, rows = stored(folder)
    own = Tokenizer.from_file(str(tmp_path / "ended.json"))
    assert rows == [own.encode(caption).ids for caption in captions]
    assert read_rows(folder, tmp_path / "ended.json") == dict(zip(captions, rows, strict=True))


def test_a_trained_bpe_puts_its_eos_at_the_largest_id_so_argmax_pools_the_eos_in_every_row(tmp_path):
    folder = tars(tmp_path / "tars")
    done = run_cli("index", str(folder), "--train-tokenizer", "bpe", "--vocab-size", "300", "--no-progress",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((folder / "manifest.json").read_text())["options"]["tokenizer"]
    assert record["eos_id"] == record["vocab_size"] - 1 > record["pad_id"]
    _, rows = stored(folder)
    assert all(int(np.argmax(row)) == len(row) - 1 and row[-1] == record["eos_id"] for row in rows)
    captions = CaptionConfig(max_length=77, pad_to_max_length=True)  # open_clip's fixed context, padded
    for batch in PairLoader(folder, batch_size=4, image_size=16, shuffle=False, captions=captions):
        ids, mask = batch["input_ids"], batch["attention_mask"]
        assert ids.shape[1] == 77 and (ids.argmax(dim=-1) == mask.sum(dim=-1) - 1).all()  # open_clip's pooling


def test_a_trained_bpe_without_an_eos_is_refused_in_one_line_naming_the_pooling(tmp_path):
    folder = tars(tmp_path / "tars")
    done = run_cli("index", str(folder), "--train-tokenizer", "bpe", "--eos", "", "--no-progress", cwd=tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 2 and "argmax" in err and "--eos" in err, err
    assert not (folder / "manifest.json").exists()
