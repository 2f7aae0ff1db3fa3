"""What a user's own training and evaluation code needs beside the batches of pairs and boxes, found by
trying the new kinds with other people's code: the public ``CaptionConfig``, a text tower sized by
``loader.vocab_size`` with its ``pad_id``, and COCO category ids for pycocotools' evaluation."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

import dataio
from dataio.formats.coco.synthetic_coco import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT))  # this tree's dataio, whichever tree the .venv was made for

CLIP_LOOP = """
import sys, torch, torch.nn as nn, torch.nn.functional as F, dataio
folder, tokenizer = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else None)
loader = dataio.DataLoader(folder, batch_size=8, shuffle=True, image_size=32, seed=0, drop_last=True,
                           captions=dataio.CaptionConfig(tokenizer=tokenizer, keys=True))
image_tower = nn.Sequential(nn.Conv2d(3, 16, 8, 8), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 16))
text_tower = nn.EmbeddingBag(loader.vocab_size, 16, mode="sum", padding_idx=loader.pad_id)
optimizer = torch.optim.AdamW([*image_tower.parameters(), *text_tower.parameters()], 1e-3)
keys = []
for batch in loader:
    images = F.normalize(image_tower(batch["image"].float() / 255), dim=-1)
    texts = F.normalize(text_tower(batch["input_ids"]), dim=-1)
    logits = 10 * images @ texts.T
    targets = torch.arange(len(logits))
    loss = (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
    optimizer.zero_grad(); loss.backward(); optimizer.step()
    keys += batch["key"]
print(len(keys), len(set(keys)), loader.vocab_size, loader.pad_id)
"""


def test_a_clip_loop_sizes_its_text_tower_from_the_loader_with_stored_or_tokenised_ids(pair_tars, pair_tars_text,
                                                                                      tmp_path):
    """An open_clip-style loop builds ``EmbeddingBag(loader.vocab_size, padding_idx=loader.pad_id)`` and passes
    ``dataio.CaptionConfig``, as a TextLoader user builds ``nn.Embedding(loader.vocab_size)``. Before, the
    script died with AttributeError (no ``dataio.CaptionConfig``, no ``vocab_size``)."""
    script = tmp_path / "clip_loop.py"
    script.write_text(CLIP_LOOP)
    stored = subprocess.run([sys.executable, str(script), str(pair_tars)], capture_output=True, text=True, timeout=300,
                            env=ENV)
    assert stored.returncode == 0, stored.stderr[-3000:]
    record = json.loads((pair_tars / "manifest.json").read_text())["options"]["tokenizer"]
    assert stored.stdout.split() == ["40", "40", str(record["vocab_size"]), str(record["pad_id"])]
    tokenised = subprocess.run([sys.executable, str(script), str(pair_tars_text), str(pair_tars / "tokenizer.json")],
                               capture_output=True, text=True, timeout=300,
                            env=ENV)
    assert tokenised.returncode == 0, tokenised.stderr[-3000:]
    count, unique, vocab, pad = tokenised.stdout.split()
    assert (count, unique, vocab) == ("40", "40", str(record["vocab_size"])) and pad.isdigit()


def test_vocab_size_bounds_every_id_and_pad_id_fills_the_padding(pair_tars, pair_tars_text):
    """Every id of a batch is below ``vocab_size`` and every padded position holds ``pad_id``, stored or
    tokenised on the decode threads; folders without ids say 0 and None."""
    tokenizer = str(pair_tars / "tokenizer.json")
    for loader in (dataio.ImageLoader(pair_tars, batch_size=16, image_size=32, train=False),
                   dataio.ImageLoader(pair_tars_text, batch_size=16, image_size=32, train=False,
                                      captions=dataio.CaptionConfig(tokenizer=tokenizer))):
        assert loader.vocab_size > 0 and loader.pad_id is not None
        for batch in loader:
            assert int(batch["input_ids"].max()) < loader.vocab_size
            padded = batch["attention_mask"] == 0
            assert padded.any() and (batch["input_ids"][padded] == loader.pad_id).all()
    captions_only = dataio.ImageLoader(pair_tars_text, batch_size=16, image_size=32, train=False)
    assert (captions_only.vocab_size, captions_only.pad_id) == (0, None)


def test_coco_category_ids_round_trip_through_pycocotools(coco_folder, coco_shards):
    """A user's COCO evaluation: the eval batches' boxes, mapped back to each photo's pixels and given
    ``loader.category_ids[label]``, are the ground truth exactly (AP 1.0 in ``COCOeval``); the names and
    ids match the JSON's categories. Before, the ids were only in an undocumented manifest field."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO(str(coco_folder[1]))
    size = 128
    loader = dataio.ImageLoader(coco_shards, batch_size=4, image_size=size, train=False,
                                targets=dataio.DetectionConfig(min_visible=0.0))
    assert loader.category_ids == tuple(cat for cat, _ in CATEGORIES)
    assert loader.dataset.category_ids == dataio.ShardDataset(coco_shards).category_ids == loader.category_ids
    assert [truth.cats[cat]["name"] for cat in loader.category_ids] == list(loader.classes)
    results = []
    for batch in loader:
        for row in torch.nonzero(~batch["repeated"]).flatten().tolist():
            photo = truth.imgs[int(batch["image_id"][row])]
            sx, sy = photo["width"] / size, photo["height"] / size
            valid = batch["valid"][row]
            boxes, labels = batch["boxes"][row][valid].tolist(), batch["labels"][row][valid].tolist()
            for (x0, y0, x1, y1), label in zip(boxes, labels, strict=True):
                results.append({"image_id": photo["id"], "category_id": loader.category_ids[label], "score": 1.0,
                                "bbox": [x0 * sx, y0 * sy, (x1 - x0) * sx, (y1 - y0) * sy]})
    assert len(results) == len(truth.anns)
    with contextlib.redirect_stdout(io.StringIO()):
        evaluation = COCOeval(truth, truth.loadRes(results), "bbox")
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    assert evaluation.stats[0] > 0.99  # AP over IoU 0.5:0.95


def test_folders_not_from_coco_have_no_category_ids(image_shards, pair_tars):
    assert dataio.ImageLoader(image_shards, batch_size=4, image_size=32).category_ids is None
    assert dataio.ShardDataset(pair_tars).category_ids is None


def test_caption_config_is_public_beside_detection_config():
    assert dataio.CaptionConfig is __import__("dataio.pairs.caption_config", fromlist=["x"]).CaptionConfig
    assert "CaptionConfig" in dataio.__all__ and "DetectionConfig" in dataio.__all__


def _plain_tokenizer(captions: list[str], path: Path) -> None:
    """A user's own BPE with BOS/EOS tokens but no post-processor and no <pad> (as most trained by hand are)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"])
    tokenizer.train_from_iterator(captions, trainer)
    tokenizer.save(str(path))


def _same_text_fields(stored: dict, tokenised: dict) -> bool:
    return all(torch.equal(stored[name], tokenised[name]) for name in ("input_ids", "attention_mask"))


def test_the_folders_own_tokenizer_on_the_decode_threads_gives_the_stored_ids(pair_tars, tmp_path):
    """``dataio index --tokenizer`` stores each caption framed ``<s> ... </s>`` and padded with EOS (no <pad>);
    the folder's own ``tokenizer.json``, run on the decode threads (or by any ``tokenizers`` user), now gives
    the very same ``input_ids`` and ``attention_mask``, cut or not. Before, it gave the ids without BOS and
    EOS, padded with 0: a model trained on stored ids was evaluated on other ids, silently."""
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer

    folder = tmp_path / "tars"
    folder.mkdir()
    for path in sorted(pair_tars.glob("0*.tar")) + sorted(pair_tars.glob("0*.parquet")):
        (folder / path.name).write_bytes(path.read_bytes())
    captions = [c for path in sorted(folder.glob("*.parquet")) for c in pq.read_table(path)["caption"].to_pylist() if c]
    _plain_tokenizer(captions, tmp_path / "mine.json")
    done = subprocess.run([sys.executable, "-m", "dataio", "index", str(folder), "--tokenizer",
                           str(tmp_path / "mine.json"), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    for packed in (folder, pair_tars):  # a user's tokenizer, and one dataio trained (--train-tokenizer bpe)
        own = packed / "tokenizer.json"
        for max_length in (None, 8):
            stored = dataio.ImageLoader(packed, batch_size=8, image_size=32, train=False,
                                        captions=dataio.CaptionConfig(max_length=max_length, text=True))
            tokenised = dataio.ImageLoader(packed, batch_size=8, image_size=32, train=False,
                                           captions=dataio.CaptionConfig(tokenizer=own, max_length=max_length))
            assert stored.pad_id == tokenised.pad_id
            pairs = list(zip(stored, tokenised, strict=True))
            assert len(pairs) == 5 and all(_same_text_fields(a, b) for a, b in pairs), (packed, max_length)
            if max_length is None:  # and any tokenizers user of the folder's tokenizer.json gets them too
                batch, tokenizer = pairs[0][0], Tokenizer.from_file(str(own))
                for row, caption in enumerate(batch["caption"]):
                    length = int(batch["attention_mask"][row].sum())
                    assert tokenizer.encode(caption).ids == batch["input_ids"][row, :length].tolist()


def test_a_tokenizer_file_saved_with_padding_and_truncation_stores_whole_captions(pair_tars, tmp_path):
    """Hugging Face saves many models' ``tokenizer.json`` with a fixed padding and truncation; given to
    ``dataio index --tokenizer``, every stored caption is its whole framed ids, as with the same file without
    them. Before, each was cut at the file's truncation and its padding stored as tokens (mask 1): silently."""
    import pyarrow.parquet as pq
    from tokenizers import Tokenizer

    captions = [c for path in sorted(pair_tars.glob("0*.parquet"))
                for c in pq.read_table(path)["caption"].to_pylist() if c]
    _plain_tokenizer(captions, tmp_path / "plain.json")
    saved = Tokenizer.from_file(str(tmp_path / "plain.json"))
    saved.enable_padding(pad_id=0, pad_token="<unk>", length=24)
    saved.enable_truncation(max_length=6)
    saved.save(str(tmp_path / "fixed_length.json"))
    rows = {}
    for name in ("plain", "fixed_length"):
        folder = tmp_path / name
        folder.mkdir()
        for path in sorted(pair_tars.glob("0*.tar")) + sorted(pair_tars.glob("0*.parquet")):
            (folder / path.name).write_bytes(path.read_bytes())
        done = subprocess.run([sys.executable, "-m", "dataio", "index", str(folder), "--tokenizer",
                               str(tmp_path / f"{name}.json"), "--no-progress"],
                              capture_output=True, text=True, timeout=300, env=ENV)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        loader = dataio.ImageLoader(folder, batch_size=40, image_size=32, train=False,
                                    captions=dataio.CaptionConfig(max_length=None, text=True))
        batch = next(iter(loader))
        rows[name] = [row[mask.bool()].tolist()
                      for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True)]
        plain = Tokenizer.from_file(str(tmp_path / "plain.json"))
        bos, eos = plain.token_to_id("<s>"), plain.token_to_id("</s>")
        assert rows[name] == [[bos, *plain.encode(c).ids, eos] for c in batch["caption"]], name
    assert max(len(row) for row in rows["fixed_length"]) > 8
