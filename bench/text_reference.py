"""TextLoader against what memory allows: the same batches gathered and padded by plain numpy.

For each token budget, ``TextLoader(mode="budget")`` (every check on: token ids
against the vocabulary, the error policy, stage times, torch tensors out) and a
reference that reads the same batches (the loader's own plan) from the same
memory-mapped shards with nothing but numpy: one slice copy per row into a padded
int64 matrix, then the mask and the shifted labels. The per-row copy is the
fastest plain gather measured here (88 M tokens/s against 45 M for a flat fancy
index and 55 M for a clipped (rows, width) gather, 64k-token batches, 2-core VM),
so the reference gathers as fast as numpy can; its mask and labels are the plain
broadcast compare and shifted ``where``. TextLoader builds the same arrays in one
C pass over the rows (``dataio/text/_collate.c``), which is where its lead comes
from. Rounds alternate between the two; the ratio is of medians.

Both run entirely in the calling thread, so each is timed in that thread's CPU
seconds (``time.thread_time``): on a machine shared with other processes, wall
time would also count the waits for a core, which land on either side at random.

The mixture row splits the corpus into five sources (every fifth document each,
tokenised with the same tokenizer) and reads them blended, against one source
holding the same documents: the same tokens in the same amount of mapped memory.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.file_gate import write_new
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.text.loader import TextLoader

IGNORE = -100


def reference_batches(loader: TextLoader):
    """The loader's batches of its current epoch, gathered and padded with plain numpy."""
    shards, plan, multiple = loader.shards, loader.plan(), loader.config.pad_multiple
    values, chunk_of, starts, lengths = shards._values, shards._chunk_of, shards._starts, shards.lengths
    for index in range(len(plan)):
        rows = plan.batch(index)
        row_lengths = lengths[rows]
        width = int(-(-int(row_lengths.max(initial=1)) // multiple) * multiple)
        ids = np.full((len(rows), width), shards.pad_id, dtype=np.int64)
        for row, sample in enumerate(rows.tolist()):
            start = starts[sample]
            ids[row, :lengths[sample]] = values[chunk_of[sample]][start:start + lengths[sample]]
        mask = np.arange(width)[None, :] < row_lengths[:, None]
        labels = np.full_like(ids, IGNORE)
        labels[:, :-1] = np.where(mask[:, 1:], ids[:, 1:], IGNORE)
        yield {"input_ids": ids, "attention_mask": mask.astype(np.int64), "labels": labels}


def _tokens_per_s(batches) -> float:
    """Batch tokens (rows x width) per CPU second of this thread."""
    start = time.thread_time()
    tokens = sum(int(batch["input_ids"].shape[0]) * int(batch["input_ids"].shape[1]) for batch in batches)
    return tokens / max(time.thread_time() - start, 1e-9)


def memory_reference(folder: Path, budgets: tuple[int, ...], rounds: int, log=print) -> list[dict[str, Any]]:
    """Per token budget: batch tokens/s of TextLoader and of the numpy reference, and their ratio."""
    out = []
    for budget in budgets:
        loader = TextLoader(folder, mode="budget", max_tokens=budget, seed=0)
        log(f"memory reference, budget {budget:,} tokens ...")
        _tokens_per_s(iter(loader))  # warm the page cache and the plan
        loader.set_epoch(0)
        dataio, reference = [], []
        for _ in range(rounds):
            loader.set_epoch(0)
            dataio.append(_tokens_per_s(iter(loader)))
            loader.set_epoch(0)
            reference.append(_tokens_per_s(reference_batches(loader)))
        batches = len(loader.plan())
        loader.close()
        rate, ref = statistics.median(dataio), statistics.median(reference)
        out.append({"budget": budget, "batches": batches, "dataio_tok_s": rate, "numpy_tok_s": ref,
                    "ratio": rate / ref})
    return out


def split_sources(texts: list[str], tokenizer: Path, max_length: int, out: Path,
                  sources: int = 5) -> dict[str, Path]:
    """``sources`` token folders under ``out``: source ``i`` holds documents ``i, i + sources, ...`` of ``texts``,
    tokenised with ``tokenizer`` (so together they hold exactly the tokens of the whole corpus)."""
    folders = {}
    for i in range(sources):
        part = out / f"part{i}.txt"
        write_new(part, "".join(text.replace("\n", " ") + "\n" for text in texts[i::sources]).encode("utf-8"))
        folders[f"source{i}"] = out / f"source{i}"
        convert_text(ConvertTextConfig(sources=(part,), out=folders[f"source{i}"], max_length=max_length,
                                       tokenizer=TokenizerConfig(path=tokenizer), progress=False))
    return folders


def mixture_cost(whole: Path, parts: dict[str, Path], budget: int, rounds: int, log=print) -> dict[str, Any]:
    """Batch tokens/s of the mixture of ``parts`` (equal weights, budget mode, one pass of each per epoch)
    against the single-source loader over ``whole`` (the same documents), in alternating rounds."""
    single = TextLoader(whole, mode="budget", max_tokens=budget, seed=0)
    mixed = TextLoader(parts, mode="budget", max_tokens=budget, seed=0, weights=dict.fromkeys(parts, 1.0))
    log(f"mixture of {len(parts)} sources against one over the same documents, budget {budget:,} tokens ...")
    _tokens_per_s(iter(mixed))  # warm the page cache and the plans
    _tokens_per_s(iter(single))
    one, many = [], []
    for _ in range(rounds):
        single.set_epoch(0)
        one.append(_tokens_per_s(iter(single)))
        mixed.set_epoch(0)
        many.append(_tokens_per_s(iter(mixed)))
    batches = (len(single.plan()), len(mixed.plan()))
    single.close()
    mixed.close()
    rate, ref = statistics.median(many), statistics.median(one)
    return {"sources": len(parts), "budget": budget, "batches": batches[0], "mixture_batches": batches[1],
            "mixture_tok_s": rate, "single_tok_s": ref, "ratio": rate / ref}
