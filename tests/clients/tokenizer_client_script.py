"""Run by ``test_clients_tokenizers.py`` in a subprocess with open_clip and transformers importable: packs tiny
img2dataset pairs with a client's own tokenizer object (Python API) and checks the stored ids, the manifest
and the loader's batches against that tokenizer's own output, row by row. Prints ``OK <name>`` per check."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import torch

from dataio import CaptionConfig, PairLoader
from dataio.formats.images.wds_index import IndexConfig, index_shards
from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.text.tokenizer_setup import TokenizerConfig

PAIRS = SyntheticPairsConfig(count=10, samples_per_shard=5, failed_fraction=0.0, seed=3)


def stored(folder: Path) -> tuple[list[str], list[list[int]], dict]:
    table = pa.ipc.open_file(folder / "samples.arrow").read_all()
    record = json.loads((folder / "manifest.json").read_text())["options"]["tokenizer"]
    return table.column("caption").to_pylist(), table.column("input_ids").to_pylist(), record


def read_batches(folder: Path, captions: CaptionConfig) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    names, ids, masks = [], [], []
    for batch in PairLoader(folder, batch_size=4, image_size=16, shuffle=False, captions=captions, num_workers=2):
        names += batch["caption"]
        ids.append(batch["input_ids"])
        masks.append(batch["attention_mask"])
    return names, torch.cat(ids), torch.cat(masks)


def check_open_clip(work: Path) -> None:
    import open_clip

    tokenizer = open_clip.get_tokenizer("ViT-B-32")
    folder = work / "clip"
    write_img2dataset(folder, PAIRS)
    index_shards(IndexConfig(shards=(folder,), tokenizer=TokenizerConfig(tokenizer=tokenizer), progress=False))
    captions, rows, record = stored(folder)
    want = tokenizer(captions)  # (N, 77), padded with 0
    for caption, row, full in zip(captions, rows, want, strict=True):
        assert row == full[:len(row)].tolist() and not full[len(row):].any(), (caption, row, full.tolist())
        assert row[-1] == tokenizer.eot_token_id, row
    assert (record["pad_id"], record["eos_id"], record["bos_id"]) == (0, tokenizer.eot_token_id,
                                                                        tokenizer.sot_token_id), record
    assert record["vocab_size"] == tokenizer.vocab_size and record["source"] == "open_clip:SimpleTokenizer", record
    print("OK open_clip stored")
    # the stored ids, padded to open_clip's 77: exactly open_clip's own tensor
    names, ids, _ = read_batches(folder, CaptionConfig(max_length=77, pad_to_max_length=True, text=True))
    assert torch.equal(ids, tokenizer(names)), "stored ids padded differ from open_clip's"
    # open_clip's tokenizer on the decode threads (under a lock): the same tensor
    names, ids, _ = read_batches(folder, CaptionConfig(tokenizer=tokenizer, max_length=77, pad_to_max_length=True,
                                                       text=True))
    assert torch.equal(ids, tokenizer(names)), "read-time open_clip ids differ from open_clip's"
    print("OK open_clip read")


def check_transformers(work: Path, tokenizer_file: Path) -> None:
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), pad_token="[PAD]")
    folder = work / "hf"
    write_img2dataset(folder, PAIRS)
    index_shards(IndexConfig(shards=(folder,), tokenizer=TokenizerConfig(tokenizer=tokenizer), progress=False))
    captions, rows, record = stored(folder)
    assert rows == [tokenizer(caption)["input_ids"] for caption in captions], rows
    assert record["eos_id"] == tokenizer.convert_tokens_to_ids("[SEP]"), record
    print("OK transformers stored")
    names, ids, mask = read_batches(folder, CaptionConfig(tokenizer=tokenizer, max_length=None, text=True))
    want = tokenizer(names, padding=True, return_tensors="pt")
    width = want["input_ids"].shape[1]
    assert torch.equal(mask[:, :width], want["attention_mask"]), "masks differ"
    assert torch.equal(ids[:, :width] * mask[:, :width], want["input_ids"] * want["attention_mask"]), "ids differ"
    print("OK transformers read")
    tokenizer.save_pretrained(str(work / "hf_dir"))  # what the CLI's hf:DIR loads


if __name__ == "__main__":
    work = Path(sys.argv[1])
    shutil.rmtree(work / "clip", ignore_errors=True)
    check_open_clip(work)
    check_transformers(work, Path(sys.argv[2]))
