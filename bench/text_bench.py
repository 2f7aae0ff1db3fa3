"""``dataio bench text SRC``: padding and useful tokens/s against the usual recipe.

The usual recipe: a Dataset that tokenises each document on the fly, random
batches, padding to the longest row, ``DataLoader(num_workers=cores)``. Its
batch size is the mean batch size dataio's token-budget mode reaches, so both
move about the same tokens per step. dataio reads the shards of the same
corpus (converted once, not timed) in each batching mode. Per loader: the
padding fraction (pad tokens / all tokens), useful tokens/s (median epoch),
and the batch-size spread. Packing runs with ``drop_last`` (the epoch's last
partial row, under ``block_size`` tokens, is left out rather than padded).
Also: the raw read rate of the memory-mapped
shards on one core (every sample's ids copied out once).
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer

from dataio.formats.dataset.manifest import read_manifest
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.text_sources import SourceStats, expand_sources, iter_documents
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from dataio.text.loader import TextLoader

from dataio.bench.report import format_table, machine_description, write_results
from dataio.bench.shards_check import shards_of_kind
from dataio.bench.text_reference import memory_reference, mixture_cost, split_sources


@dataclass(frozen=True, kw_only=True)
class BenchTextConfig:
    """Options of the text benchmark."""

    src: tuple[Path, ...]
    out: Path = Path("bench/results")
    shards: Path | None = None
    max_tokens: int = 16384
    max_length: int = 1024
    vocab_size: int = 8192
    num_workers: int = field(default_factory=lambda: __import__("os").cpu_count() or 1)
    epochs: int = 3
    reference_budgets: tuple[int, ...] = (8192, 65536, 1 << 20)  # token budgets timed against plain numpy
    reference_rounds: int = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "src", tuple(Path(p) for p in self.src))
        object.__setattr__(self, "out", Path(self.out))
        if self.max_tokens < self.max_length or self.epochs < 1 or self.num_workers < 1:
            raise ValueError("need max_tokens >= max_length, epochs >= 1, num_workers >= 1")


class _OnTheFly(torch.utils.data.Dataset):
    """The usual recipe's Dataset: raw text in, token ids out, tokenised per item."""

    def __init__(self, texts: list[str], tokenizer_path: Path, max_length: int) -> None:
        self.texts, self.path, self.max_length = texts, str(tokenizer_path), max_length
        self.tokenizer = None

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int) -> list[int]:
        if self.tokenizer is None:
            self.tokenizer = Tokenizer.from_file(self.path)
        return self.tokenizer.encode(self.texts[index]).ids[: self.max_length]


def _pad_to_longest(rows: list[list[int]]) -> dict[str, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.int64)
    mask = torch.zeros(len(rows), width, dtype=torch.int64)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
        mask[i, :len(row)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def _run_epochs(make_batches, epochs: int) -> dict[str, Any]:
    """Median useful tokens/s over ``epochs`` (after one warm-up), plus padding and batch sizes."""
    rates, padding, sizes = [], [], []
    for epoch in range(epochs + 1):
        real = total = 0
        start = time.perf_counter()
        for batch in make_batches(epoch):
            mask = batch["attention_mask"]
            real += int(mask.sum())
            total += mask.numel()
            if epoch == 0:
                sizes.append(len(mask))
        elapsed = time.perf_counter() - start
        if epoch:
            rates.append(real / elapsed)
            padding.append(1 - real / total)
    return {"useful_tok_s": statistics.median(rates), "padding": statistics.median(padding),
            "batch_min": min(sizes), "batch_mean": float(np.mean(sizes)), "batch_max": max(sizes),
            "batches": len(sizes)}


def read_rate(loader) -> float:
    """Tokens/s copying every sample's ids out of the memory maps, one core."""
    shards = loader.shards
    buffer = np.empty(int(shards.lengths.max()), dtype=np.int64)
    start = time.perf_counter()
    for sample in range(len(shards)):
        ids = shards.tokens(sample)
        buffer[:len(ids)] = ids
    return float(shards.lengths.sum()) / (time.perf_counter() - start)


def bench_text(config: BenchTextConfig, log=print) -> dict[str, Any]:
    texts = [d.text for d in iter_documents(expand_sources(list(config.src)), doc_sep="line", field_name="text",
                                            stats=SourceStats())]
    with tempfile.TemporaryDirectory(prefix="dataio-bench-text-") as tmp:
        folder = config.shards
        if folder is not None:
            shards_of_kind(folder, ("tokens",), "a `dataio convert text` of SRC")
        if folder is None:
            folder = Path(tmp) / "shards"
            log(f"converting {len(texts)} documents -> {folder}")
            convert_text(ConvertTextConfig(sources=config.src, out=folder, max_length=config.max_length,
                                           tokenizer=TokenizerConfig(train="bpe", vocab_size=config.vocab_size),
                                           progress=False))
        folder, manifest = read_manifest(folder)

        def dataio_rows(name: str, **options) -> dict[str, Any]:
            loader = TextLoader(folder, **options)

            def batches(epoch: int):
                loader.set_epoch(epoch)
                return iter(loader)

            log(f"running dataio {name} ...")
            return {"loader": f"dataio {name}", **_run_epochs(batches, config.epochs), "_loader": loader}

        budget = dataio_rows("budget", mode="budget", max_tokens=config.max_tokens)
        batch_size = max(1, round(budget["batch_mean"]))
        rows = [
            dataio_rows("fixed", mode="fixed", batch_size=batch_size),
            dataio_rows("bucket", mode="bucket", batch_size=batch_size),
            budget,
            dataio_rows("pack", mode="pack", block_size=config.max_length, drop_last=True,
                        batch_size=max(1, config.max_tokens // config.max_length)),
        ]
        rate = read_rate(budget["_loader"])
        reference = memory_reference(folder, config.reference_budgets, config.reference_rounds, log)
        log("tokenising the corpus again as five sources, for the mixture row ...")
        parts = split_sources(texts, folder / "tokenizer.json", config.max_length, Path(tmp))
        mixture = mixture_cost(folder, parts, config.max_tokens, config.reference_rounds, log=log)
        dataset = _OnTheFly(texts, folder / "tokenizer.json", config.max_length)
        log("running the usual recipe ...")
        usual = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=config.num_workers,
                                            collate_fn=_pad_to_longest, persistent_workers=True)
        rows.insert(0, {"loader": "usual: tokenise on the fly + random batches", **_run_epochs(lambda e: iter(usual),
                                                                                                  config.epochs)})
        del usual
    for row in rows:
        row.pop("_loader", None)
        row["vs_usual"] = row["useful_tok_s"] / rows[0]["useful_tok_s"]
    by_name = {row["loader"]: row for row in rows}
    measured = {"padding_bucket": by_name["dataio bucket"]["padding"],
                "padding_budget": by_name["dataio budget"]["padding"],
                "padding_pack": by_name["dataio pack"]["padding"],
                "useful_vs_usual": min(by_name[f"dataio {m}"]["vs_usual"] for m in ("bucket", "budget", "pack")),
                "read_tokens_per_s": rate}
    checks = {k: {"value": v} for k, v in measured.items()}
    checks["padding_usual"] = {"value": rows[0]["padding"]}
    result = {"benchmark": "text", "date": datetime.date.today().isoformat(), "machine": machine_description(),
              "corpus": {"documents": len(texts), "samples": manifest.num_samples,
                         "tokens": manifest.options["num_tokens"],
                         "length_histogram": manifest.options["length_histogram"]},
              "config": {k: [str(p) for p in v] if k == "src" else str(v) if isinstance(v, Path) else v
                         for k, v in asdict(config).items()},
              "usual_batch_size": batch_size, "rows": rows, "read_tokens_per_s": rate, "checks": checks,
              "memory_reference": reference, "mixture": mixture}
    log(render(result))
    paths = write_results(config.out, "text", result, {r["loader"]: r["useful_tok_s"] for r in rows},
                          "useful tokens/s")
    log("wrote " + ", ".join(str(p) for p in paths))
    return result


def render(result: dict[str, Any]) -> str:
    m, c, corpus = result["machine"], result["config"], result["corpus"]
    head = (f"dataio bench text, {result['date']}: {m['cpu']}, {m['cores']} cores; {corpus['documents']} documents, "
            f"{corpus['tokens']:,} tokens; token budget {c['max_tokens']}, max length {c['max_length']}, "
            f"usual recipe batch {result['usual_batch_size']} x {c['num_workers']} workers; median of {c['epochs']} epochs")
    table = format_table(result["rows"], [("loader", "loader", "s"), ("padding", "padding", ".1%"),
                                          ("useful_tok_s", "useful tok/s", ",.0f"), ("vs_usual", "vs usual", ".1f"),
                                          ("batch_min", "rows min", "d"), ("batch_mean", "mean", ".1f"),
                                          ("batch_max", "max", "d")])
    lines = [head, table, f"memory-mapped read rate, one core: {result['read_tokens_per_s'] / 1e6:,.0f} M tokens/s"]
    lines += ["TextLoader (budget mode, every check on) against plain numpy gathering and padding the same batches "
              "from the same memory-mapped shards (batch tokens per CPU second, median of alternating rounds):",
              format_table(result["memory_reference"], [("budget", "token budget", ",d"), ("batches", "batches", "d"),
                                                        ("dataio_tok_s", "TextLoader tok/s", ",.0f"),
                                                        ("numpy_tok_s", "numpy tok/s", ",.0f"),
                                                        ("ratio", "ratio", ".2f")])]
    mix = result["mixture"]
    lines.append(f"a {mix['sources']}-source mixture (budget mode, equal weights, every fifth document a source) "
                 f"against one source of the same documents: {mix['mixture_tok_s']:,.0f} against "
                 f"{mix['single_tok_s']:,.0f} batch tokens/s per CPU second, ratio {mix['ratio']:.2f}")
    checks = result["checks"]
    lines += [f"compared on this machine ({m['cpu']}, {m['cores']} cores) with the usual recipe (tokenise on the fly, "
              f"random batches of {result['usual_batch_size']}, padded to the longest row, {c['num_workers']} "
              "DataLoader workers):",
              f"  padding: dataio bucket {checks['padding_bucket']['value']:.1%}, budget "
              f"{checks['padding_budget']['value']:.1%}, pack {checks['padding_pack']['value']:.1%}; the usual recipe "
              f"{checks['padding_usual']['value']:.1%}",
              f"  useful tokens/s: the slowest of dataio's bucket, budget and pack modes ran at "
              f"{checks['useful_vs_usual']['value']:.1f}x the usual recipe"]
    return "\n".join(lines)
