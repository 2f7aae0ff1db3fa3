"""The ``dataio`` command line: each subcommand maps its flags onto a config dataclass.

This is the only module that reads environment variables
(``DATAIO_NUM_WORKERS``: default worker count; ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK`` from ``torchrun`` for ``dataio train``; for ``convert --rank/--world-size``
the defaults come from a SLURM array, a SLURM job step or torchrun: ``_conversion_rank``). Bad invocations print one
line and exit 2 (an OUT that exists as a file or cannot be created or
written counts as one); data errors, and output that fails while being
written (disk full), print one line and exit 1; Ctrl-C prints one line and
exits 130 (``dataio train``: SIGTERM 143, SIGUSR1 138, after its checkpoint).

Deliberately lazy: each command imports its stage inside its handler, so
``dataio --help`` and the converters start without importing torch, and
``bench/`` is imported only by the ``bench`` and ``demo`` commands.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from dataio.formats.errors import ConfigError, DataioError, UsageError
from dataio.formats.limits import MAX_PIXELS


def _default_workers() -> int:
    value = os.environ.get("DATAIO_NUM_WORKERS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise UsageError(f"DATAIO_NUM_WORKERS={value!r} is not an integer") from None
    return os.cpu_count() or 1


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def _workers(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0 or auto, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0 or auto, got {value}")
    return value


def _cpu_budget(text: str) -> int | float:
    try:
        value: int | float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a core count or a share in (0, 1], got {text!r}") from None
    if (isinstance(value, int) and value < 1) or (isinstance(value, float) and not 0 < value <= 1):
        raise argparse.ArgumentTypeError(f"must be a core count >= 1 or a share in (0, 1], got {text!r}")
    return value


def _add_rank_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rank", type=int, help="this process's share of a multi-node conversion (default: "
                        "SLURM_ARRAY_TASK_ID, SLURM_PROCID or RANK)")
    parser.add_argument("--world-size", type=int, help="number of processes sharing the conversion (default: "
                        "SLURM_ARRAY_TASK_COUNT, SLURM_NTASKS or WORLD_SIZE; else 1)")


# (rank, world size) variables, in order of precedence: a SLURM array, a SLURM job step, torchrun
_RANK_VARIABLES = (("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"), ("SLURM_PROCID", "SLURM_NTASKS"),
                   ("RANK", "WORLD_SIZE"))


def _conversion_rank(args: argparse.Namespace) -> dict[str, int]:
    """``rank`` and ``world_size`` for a converter: the flags, else the first pair of variables set."""
    rank, world_size = args.rank, args.world_size
    for rank_name, size_name in _RANK_VARIABLES:
        if rank is not None and world_size is not None:
            break
        if rank_name in os.environ and size_name in os.environ:
            try:
                env_rank, env_size = int(os.environ[rank_name]), int(os.environ[size_name])
            except ValueError:
                raise UsageError(f"{rank_name}/{size_name} must be integers, got {os.environ[rank_name]!r}/"
                                 f"{os.environ[size_name]!r}") from None
            if rank_name == "SLURM_ARRAY_TASK_ID":  # arrays may start at 1 (--array=1-8)
                env_rank -= int(os.environ.get("SLURM_ARRAY_TASK_MIN", "0") or 0)
            rank = env_rank if rank is None else rank
            world_size = env_size if world_size is None else world_size
    world_size = 1 if world_size is None else world_size
    rank = 0 if rank is None else rank
    if world_size < 1 or not 0 <= rank < world_size:
        raise UsageError(f"--rank must be in 0..{world_size - 1} and --world-size >= 1, got {rank} of {world_size}")
    return {"rank": rank, "world_size": world_size}


def _source(text: str) -> str | Path:
    """A folder argument: an fsspec URL (``s3://...``, ``https://...``) stays a string, anything else a Path."""
    return text if "://" in text and not text.startswith("file://") else Path(text)


def _storage_options(pairs: list[str] | None) -> dict[str, object] | None:
    """``--storage-option KEY=VALUE`` pairs as the backend's options; ``a.b=v`` nests, JSON values are parsed.

    Credentials usually come from the backend's own environment variables
    (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...), read by botocore itself.
    """
    if not pairs:
        return None
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--storage-option takes KEY=VALUE, got {key or pair!r}")  # the value may be a secret
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        *parents, leaf = key.split(".")
        target = options
        for parent in parents:
            target = target.setdefault(parent, {})  # type: ignore[assignment]
            if not isinstance(target, dict):
                raise UsageError(f"--storage-option {key}: {parent} is set twice")
        target[leaf] = parsed
    return options


def _local_for_ranks(out: str | Path, ranks: dict[str, int]) -> None:
    """A multi-node conversion merges its ranks' folders in OUT: OUT must be a folder all ranks share."""
    if isinstance(out, str) and ranks["world_size"] > 1:
        raise UsageError("--world-size > 1 needs OUT on a file system all ranks share (each rank writes "
                         "OUT/rank-R-of-N, the last merges); convert there, then copy the result to the URL")


def _add_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                        help="an fsspec backend option for s3://, gs://, https:// folders (repeatable; "
                             "a.b=v nests; default: none, the backend's own settings); AWS_* environment "
                             "variables work as usual")


class _HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless its help already speaks of the default, or the
    default is None (the help then says what happens) or False (a flag, off unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text.lower() and action.default is not None and action.default is not False
                and action.default != argparse.SUPPRESS
                and (action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """The parser of ``dataio`` and of each subcommand (``add_subparsers`` makes its own class): defaults shown."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def _parser() -> argparse.ArgumentParser:
    from dataio import __version__

    parser = _Parser(prog="dataio", description="Pack, read and benchmark training data.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    convert = commands.add_parser("convert", help="pack a source folder or corpus into shards")
    kinds = convert.add_subparsers(dest="kind", required=True)
    images = kinds.add_parser("images", help="ImageNet-layout folder, or Hugging Face Parquet files -> shards")
    images.add_argument("src", type=Path, help="an ImageNet-layout folder (SRC/<class>/<image>), or Hugging Face "
                        "Parquet files: a .parquet file, a glob or a folder of them")
    images.add_argument("out", type=_source, help="a folder, or an s3://, gs://... URL (staged locally, then uploaded)")
    images.add_argument("--staging", type=Path, help="remote OUT: the local folder it is converted in (default "
                        "~/.cache/dataio/staging/<hash of OUT>, so a rerun resumes)")
    _add_storage(images)
    images.add_argument("--format", choices=["wds", "arrow"], default="wds",
                        help="wds: WebDataset tars; arrow: Arrow IPC in the Hugging Face image layout")
    images.add_argument("--classes", type=Path, help="class names, one per line (line i is label i); default: "
                        "the folder names, or a Parquet source's Hugging Face features")
    images.add_argument("--image-column", help="Parquet sources: the image column (default image)")
    images.add_argument("--label-column", help="Parquet sources: the label column (default label)")
    images.add_argument("--shard-size", default="256MB", help="bytes per shard, e.g. 256MB")
    images.add_argument("--max-shard-samples", type=_positive,
                        help="also close a shard after this many samples (default: no limit, only --shard-size)")
    images.add_argument("--max-side", type=_positive, help="downscale so the longer side is at most N "
                        "(default: full size)")
    images.add_argument("--quality", type=int, help="re-encode every image at this JPEG quality (default: "
                        "clean JPEGs keep their own encoding)")
    images.add_argument("--max-pixels", type=_positive, default=MAX_PIXELS, help="decompression-bomb limit")
    images.add_argument("--restart-interval", type=int, metavar="MCUS",
                        help="most MCUs between JPEG restart markers, so the loader can cut a crop out before "
                             "decoding (a lossless rewrite; default 2); 0 keeps clean JPEGs byte for byte")
    images.add_argument("--workers", type=_positive, help="converter processes (default: DATAIO_NUM_WORKERS, "
                        "else all cores); the output is the same bytes whatever the count")
    images.add_argument("--strict", action="store_true", help="exit non-zero if any file is rejected")
    images.add_argument("--overwrite", action="store_true",
                        help="delete what OUT holds and convert again (default: resume an interrupted run)")
    images.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    _add_rank_flags(images)

    text = kinds.add_parser("text", help="text corpus -> pre-tokenised Arrow (or WebDataset) shards")
    text.add_argument("src", type=_source, nargs="+",
                      help=".txt/.jsonl/.parquet files or folders, then OUT (a folder or an s3://... URL)")
    text.add_argument("--staging", type=Path, help="remote OUT: the local folder it is converted in (default "
                      "~/.cache/dataio/staging/<hash of OUT>, so a rerun resumes)")
    _add_storage(text)
    text.add_argument("--tokenizer", type=Path, help="a HF tokenizers JSON file (default: none; give it or "
                      "--train-tokenizer)")
    text.add_argument("--train-tokenizer", choices=["bpe"], help="train a byte-level BPE tokenizer on SRC "
                      "(default: none; give it or --tokenizer)")
    text.add_argument("--vocab-size", type=_positive, default=8192,
                      help="vocabulary size of the tokenizer --train-tokenizer trains (260 to 2**24)")
    text.add_argument("--bos", default="<s>", help="BOS token ('' for none)")
    text.add_argument("--eos", default="</s>", help="EOS token ('' for none)")
    text.add_argument("--pad", default="<pad>", help="padding token (falls back to EOS if the tokenizer lacks it)")
    text.add_argument("--doc-sep", choices=["line", "blank"], default="line",
                      help=".txt sources: one document per line, or per paragraph (blank-line separated)")
    text.add_argument("--field", default="text", help="field of .jsonl records / column of .parquet files")
    text.add_argument("--max-length", type=_positive, default=2048, help="longer documents are split into chunks")
    text.add_argument("--format", choices=["arrow", "wds"], default="arrow",
                      help="arrow: memory-mappable Arrow IPC shards; wds: the same rows as WebDataset .npy members")
    text.add_argument("--shard-tokens", type=_positive, default=50_000_000, help="tokens per shard")
    text.add_argument("--overwrite", action="store_true",
                      help="delete what OUT holds and convert again (default: resume an interrupted run)")
    text.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    _add_rank_flags(text)
    text.add_argument("--tokenizer-wait", type=float, metavar="SECONDS",
                      help="how long a rank > 0 waits for the tokenizer rank 0 trains (default 3600)")

    merge = commands.add_parser("merge", help="merge the rank folders of a multi-node conversion into one dataset")
    merge.add_argument("out", type=Path, help="the OUT folder holding rank-R-of-N folders")
    merge.add_argument("--verify", action="store_true",
                       help="also check every shard's sha256 before publishing (default: presence and sizes)")

    index = commands.add_parser("index", help="adopt existing WebDataset tars in place: sample table, DALI "
                                               "indexes and manifest beside them, the tars untouched")
    index.add_argument("shards", type=Path, nargs="+", help=".tar files in one folder, or the folder")
    index.add_argument("--classes", type=Path, help="class names, one per line (line i is label i); default: "
                       "0..K-1")
    index.add_argument("--workers", type=_positive, help="indexing threads (default: all cores, at most 8)")
    index.add_argument("--overwrite", action="store_true", help="index a folder that has a manifest again")
    index.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")

    check = commands.add_parser("verify", help="check a shard folder: checksums, counts, decodability")
    check.add_argument("out", type=_source, help="a shard folder, or its s3://, gs://, https:// URL")
    _add_storage(check)
    check.add_argument("--deep", action="store_true", help="decode every image / check every token id")

    bench = commands.add_parser("bench", help="throughput benchmarks")
    bench_kinds = bench.add_subparsers(dest="kind", required=True)
    bench_images = bench_kinds.add_parser("images", help="image loaders on the same folder")
    bench_images.add_argument("src", type=Path, help="an ImageNet-layout folder, read as it is by the standard "
                              "recipe and converted (unless --shards) for the others")
    bench_images.add_argument("--shards", type=_source, help="an existing conversion of SRC (a folder, or an "
                              "s3://... URL: the remote row is timed beside the local one; default: SRC is "
                              "converted into a temporary folder first)")
    _add_storage(bench_images)
    bench_images.add_argument("--out", type=Path, default=Path("bench/results"),
                              help="folder for images.json and images.png")
    bench_images.add_argument("--batch-size", type=_positive, default=256, help="images per batch")
    bench_images.add_argument("--image-size", type=_positive, default=224,
                              help="side of the crops (train and eval), in pixels")
    bench_images.add_argument("--workers", type=_positive, help="DataLoader workers / decode threads of every "
                              "loader (default: DATAIO_NUM_WORKERS, else all cores)")
    bench_images.add_argument("--epochs", type=_positive, default=3, help="timed epochs per loader (the median counts)")
    bench_images.add_argument("--warmup", type=int, default=1, help="untimed epochs per loader before the timed ones")
    bench_images.add_argument("--rounds", type=_positive, default=1,
                              help="run the whole loader sequence this many times (medians over all rounds)")
    bench_images.add_argument("--loaders", help="comma-separated (default: standard,webdataset,shard_dataset,dali_cpu,"
                              "dali_cpu_plain,dataio,dataio_unchecked,standard_eval,dataio_eval,dataio_mixture, plus "
                              "dataio_dali_gpu on a GPU machine, the DALI rows where DALI is installed; dali_cpu_plain "
                              "is DALI over a "
                              "copy packed without restart markers; with --photo-classes: standard,dataio,"
                              "standard_eval,dataio_eval)")
    bench_images.add_argument("--photo-classes", help="comma-separated photo classes (small, imagenet, camera): SRC is "
                              "then a folder holding SRC/<class> for each, generated if absent, and the loaders run "
                              "on each class (default: none, SRC is one folder of images)")
    bench_images.add_argument("--photo-images", type=_positive, help="photos generated per class when SRC/<class> is "
                              "absent (default: 1024, camera 256)")
    bench_images.add_argument("--limit-images", type=_positive, default=1000,
                              help="images the single-thread stage limits decode (default: 1000)")

    bench_augment = bench_kinds.add_parser("augment", help="device augmentation against kornia and a PIL loop")
    bench_augment.add_argument("--out", type=Path, default=Path("bench/results"),
                               help="folder for augment-DEVICE.json and .png")
    bench_augment.add_argument("--device", help="cpu or cuda (default: cuda when present)")
    bench_augment.add_argument("--batch-size", type=_positive, default=256, help="images per batch")
    bench_augment.add_argument("--image-size", type=_positive, default=224, help="image side, in pixels")
    bench_augment.add_argument("--repeats", type=_positive, default=7, help="timed runs of each op (the median counts)")

    bench_text = bench_kinds.add_parser("text", help="text batching against the usual on-the-fly recipe")
    bench_text.add_argument("src", type=Path, nargs="+", help=".txt/.jsonl/.parquet corpus files")
    bench_text.add_argument("--shards", type=Path, help="an existing `dataio convert text` of SRC (default: "
                            "SRC is converted into a temporary folder first)")
    bench_text.add_argument("--out", type=Path, default=Path("bench/results"), help="folder for text.json and text.png")
    bench_text.add_argument("--max-tokens", type=_positive, default=16384, help="token budget per batch")
    bench_text.add_argument("--max-length", type=_positive, default=1024,
                            help="longest sample in tokens (the block size when packing)")
    bench_text.add_argument("--vocab-size", type=_positive, default=8192,
                            help="vocabulary of the BPE tokenizer trained on SRC (without --shards)")
    bench_text.add_argument("--workers", type=_positive, help="DataLoader workers of the usual recipe (default: "
                            "DATAIO_NUM_WORKERS, else all cores)")
    bench_text.add_argument("--epochs", type=_positive, default=3, help="timed epochs per loader (the median counts)")

    bench_sampler = bench_kinds.add_parser("sampler", help="shard mixing of the two-level shuffle")
    bench_sampler.add_argument("--out", type=Path, default=Path("bench/results"),
                               help="folder for sampler.json and sampler.png")
    bench_sampler.add_argument("--num-samples", type=_positive, default=1_281_167,
                               help="samples of the simulated data set (ImageNet-1k's train split)")
    bench_sampler.add_argument("--num-shards", type=_positive, default=1024, help="shards of the simulated data set")

    fit = commands.add_parser("train", help="train a model on shards (torchrun for DDP)")
    fit.add_argument("--train", action="append", metavar="[NAME=W:]PATH",
                     help="train shards (images or text; a folder or URL); repeat NAME=W:PATH for a mixture of "
                          "sources blended by weights W (default: none; give --train or --mixture)")
    fit.add_argument("--mixture", type=Path, metavar="FILE",
                     help="a mixture file instead of --train: JSON (or YAML with PyYAML) naming the sources, their "
                          "weights or a schedule in fractions of training or steps, and the epoch rule "
                          "(docs/mixtures.md; default: none)")
    fit.add_argument("--epoch-length", type=_positive, metavar="UNITS",
                     help="a mixture's epoch: UNITS samples (documents when packing text, batches in budget mode) "
                          "(default: one pass of every source)")
    fit.add_argument("--epoch-until", metavar="NAME",
                     help="a mixture's epoch ends when source NAME (or all: every source) finishes a pass "
                          "(default: one pass of every source)")
    fit.add_argument("--val", action="append", metavar="[NAME=]PATH",
                     help="validation shards (a folder or URL); repeat NAME=PATH for named sets, each evaluated "
                          "and logged apart (val_loss/NAME, ...) beside their total (default: none, no validation)")
    _add_storage(fit)
    fit.add_argument("--model", default="small_cnn", help="resnet18, resnet50, small_cnn, small_gpt, tiny_gpt")
    fit.add_argument("--epochs", type=_positive, default=10, help="epochs to train")
    fit.add_argument("--image-size", type=_positive, default=224,
                     help="images: side of the train crops (the end size with --progressive)")
    fit.add_argument("--batch-size", type=_positive, default=128, help="per rank (images; rows when packing text)")
    fit.add_argument("--max-tokens", type=_positive, default=16384, help="text: tokens per batch (budget mode)")
    fit.add_argument("--block-size", type=_positive, default=512, help="text: tokens per packed row")
    fit.add_argument("--pack", action="store_true", help="text: pack documents into rows instead of budget batches")
    fit.add_argument("--out", type=Path, default=Path("runs/train"),
                     help="run folder: checkpoint.pt, log.json, train.png, profile/")
    fit.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd",
                     help="SGD with Nesterov momentum, or AdamW")
    fit.add_argument("--lr", type=float, help="peak LR (default 0.1 x global batch / 256 for SGD, 3e-3 for AdamW)")
    fit.add_argument("--weight-decay", type=float, help="weight decay, not applied to norms and biases (default "
                     "5e-5 for SGD, 0.05 for AdamW)")
    fit.add_argument("--warmup", type=float, default=0.1, help="share of steps warming up to the peak LR")
    fit.add_argument("--label-smoothing", type=float, default=0.1, help="label smoothing of the image loss")
    fit.add_argument("--randaugment", type=int, default=0, help="RandAugment magnitude 1-10 (0: off)")
    fit.add_argument("--mixup", type=float, default=0.0, help="MixUp alpha (0: off)")
    fit.add_argument("--cutmix", type=float, default=0.0, help="CutMix alpha (0: off)")
    fit.add_argument("--progressive", action="store_true", help="ramp the resolution up to --image-size")
    fit.add_argument("--dynamic-batch", action="store_true", help="with --progressive: bigger batches at low res")
    fit.add_argument("--amp", choices=["auto", "bf16", "fp16", "off"], default="auto",
                     help="mixed precision: bf16, fp16 with a GradScaler, or off; auto: bf16 on a GPU that has it, "
                          "fp16 on others, off on the CPU")
    fit.add_argument("--no-channels-last", action="store_true", help="keep the model in NCHW (default: channels_last)")
    fit.add_argument("--compile", action="store_true", help="torch.compile the model")
    fit.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or mps; auto: cuda:LOCAL_RANK when there is a GPU, "
                     "else cpu")
    fit.add_argument("--workers", type=_workers, help="decode threads per rank, or auto (measured; default: "
                     "one per core)")
    fit.add_argument("--cpu-budget", type=_cpu_budget,
                     help="with --workers auto: cores (an integer) or share of them (0-1) for decoding "
                          "(default: all but one)")
    fit.add_argument("--profile", type=_positive, nargs="?", const=20, default=0, metavar="STEPS",
                     help="write a torch.profiler trace of STEPS steps (default 20) to OUT/profile")
    fit.add_argument("--seed", type=int, default=0, help="seed of the model's init, the epoch order and augmentation")
    fit.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: per epoch)")
    fit.add_argument("--resume", action="store_true",
                     help="continue from OUT/checkpoint.pt (more --epochs or another --batch-size re-plan the LR)")
    fit.add_argument("--progress-every", type=_seconds, default=30.0, metavar="SECONDS",
                     help="seconds between step progress lines when stdout is not a terminal (a bar when it "
                          "is); 0: no step progress (default 30)")
    fit.add_argument("--tensorboard", action="store_true",
                     help="TensorBoard scalars in OUT/tensorboard (needs the tensorboard package)")
    fit.add_argument("--halt-after-steps", type=_positive, help=argparse.SUPPRESS)  # fault injection for tests

    synth_text = commands.add_parser("synth-text", help="generate a text corpus with a natural length spread")
    synth_text.add_argument("out", type=Path, help="output .txt file")
    synth_text.add_argument("--documents", type=_positive, default=20000, help="documents to write, one per line")
    synth_text.add_argument("--mean-words", type=_positive, default=250, help="mean words per document")
    synth_text.add_argument("--seed", type=int, default=0, help="seed of the generator: same seed, same file")

    synth = commands.add_parser("synth", help="generate a small ImageNet-layout folder")
    synth.add_argument("out", type=Path, help="output folder: OUT/<class>/<image>.jpg")
    synth.add_argument("--classes", type=_positive, default=10, help="class folders to write")
    synth.add_argument("--per-class", type=_positive, default=200, help="images per class")
    synth.add_argument("--seed", type=int, default=0, help="seed of the generator: same seed, same images")
    synth.add_argument("--photo-class", choices=("small", "imagenet", "camera"), default="small",
                       help="photo sizes: small ~50 KB, imagenet ~110 KB, camera 5-12 MP ~2-4 MB (default: small)")

    demo = commands.add_parser("demo", help="generate data, convert it, benchmark the loaders")
    demo.add_argument("--out", type=Path, default=Path("demo-data"),
                      help="folder for the images, their shards and the results (reused by the next run)")
    demo.add_argument("--classes", type=_positive, default=10, help="classes of the generated folder")
    demo.add_argument("--per-class", type=_positive, default=200, help="images per class")
    demo.add_argument("--epochs", type=_positive, default=3, help="timed epochs per loader")
    return parser


# Library parameters whose flag is not ``--`` + the name with dashes.
_FLAGS = {"path": "--tokenizer", "train": "--train-tokenizer", "overwrite=True": "--overwrite",
          "bos=None": "--bos ''", "eos=None": "--eos ''", "num_workers": "--workers"}


def _flag_names(parameters: tuple[str, ...]) -> dict[str, str]:
    """The flag that sets each library parameter, for error messages."""
    return {p: _FLAGS.get(p, "--" + p.replace("_", "-")) for p in parameters}


def _given(**options: object) -> dict[str, object]:
    """The options given on the command line (not None); the others keep the config's defaults."""
    return {name: value for name, value in options.items() if value is not None}


def _maybe_remote(args: argparse.Namespace, out: str | Path, run):
    """``run(out)`` for a local OUT; for a URL, run it in the staging folder and upload (manifest last)."""
    if not isinstance(out, str):
        if args.storage_option or args.staging:
            raise UsageError("--storage-option and --staging are for a remote OUT (an s3://... URL)")
        return run(out)
    from dataio.formats.remote.remote_output import convert_to_remote, default_staging

    staging = args.staging or default_staging(out)
    summary, sent = convert_to_remote(out, run, storage_options=_storage_options(args.storage_option),
                                      staging=staging)
    if summary is None:
        print(f"{staging} was already converted; uploaded {sent} missing file(s) to {out}")
    else:
        print(f"uploaded {sent} file(s) from {staging} to {out}")
    return summary


def _convert_images(args: argparse.Namespace) -> int:
    from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
    from dataio.formats.images.image_prepare import ImagePrepareConfig
    from dataio.formats.remote.remote_output import default_staging

    config = ConvertImagesConfig(  # a remote OUT is converted in its staging folder first
        src=args.src, out=args.out if isinstance(args.out, Path) else args.staging or default_staging(args.out),
        format=args.format, shard_size=args.shard_size, max_shard_samples=args.max_shard_samples,
        classes_file=args.classes, **_given(image_column=args.image_column, label_column=args.label_column),
        num_workers=args.workers or _default_workers(), strict=args.strict, overwrite=args.overwrite,
        progress=not args.no_progress,
        prepare=ImagePrepareConfig(max_side=args.max_side, quality=args.quality, max_pixels=args.max_pixels,
                                   **_given(restart_interval=args.restart_interval)),
        **_conversion_rank(args),
    )
    _local_for_ranks(args.out, {"world_size": config.world_size})
    summary = _maybe_remote(args, args.out, lambda out: convert_images(dataclasses.replace(config, out=out)))
    if summary is None:
        return 0
    for rejected in summary.rejected:
        print(f"rejected {rejected['path']}: {rejected['reason']}", file=sys.stderr)
    print(summary.line())
    return 1 if config.strict and summary.num_rejected else 0


def _merge(args: argparse.Namespace) -> int:
    from dataio.formats.ranks.rank_merge import merge_ranks

    manifest = merge_ranks(args.out, verify=args.verify)
    print(f"merged {manifest.options['ranks']} ranks into {args.out}: {manifest.num_samples} samples in "
          f"{len(manifest.shards)} shards")
    return 0


def _index(args: argparse.Namespace) -> int:
    from dataio.formats.images.wds_index import IndexConfig, index_shards

    summary = index_shards(IndexConfig(shards=tuple(args.shards), classes_file=args.classes,
                                       overwrite=args.overwrite, progress=not args.no_progress,
                                       **_given(num_workers=args.workers)))
    print(summary.line())
    return 0


def _convert_text(args: argparse.Namespace) -> int:
    from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
    from dataio.formats.text.tokenizer_setup import TokenizerConfig

    if len(args.src) < 2:
        raise UsageError("give at least one source and the output folder: dataio convert text SRC... OUT")
    *sources, out = args.src
    tokenizer = TokenizerConfig(path=args.tokenizer, train=args.train_tokenizer, vocab_size=args.vocab_size,
                                bos=args.bos or None, eos=args.eos or None, pad=args.pad)
    if any(isinstance(source, str) for source in sources):
        raise UsageError("text sources are local files or folders; only OUT may be a URL")
    ranks = _conversion_rank(args)
    _local_for_ranks(out, ranks)

    def run(folder: Path):
        return convert_text(ConvertTextConfig(
            sources=tuple(sources), out=folder, tokenizer=tokenizer, doc_sep=args.doc_sep, field=args.field,
            max_length=args.max_length, format=args.format, shard_tokens=args.shard_tokens,
            overwrite=args.overwrite, progress=not args.no_progress, **ranks,
            **_given(tokenizer_wait=args.tokenizer_wait)))

    summary = _maybe_remote(args, out, run)
    if summary is None:
        return 0
    for kind, examples in sorted(summary.examples.items()):
        print(f"skipped ({kind}): {', '.join(examples)}{' ...' if summary.skipped[kind] > len(examples) else ''}",
              file=sys.stderr)
    print(summary.line())
    return 0


def _bench_images(args: argparse.Namespace) -> int:
    from dataio.bench.images import BenchImagesConfig, bench_images

    remote = args.shards if isinstance(args.shards, str) else None  # a URL: local shards converted on the fly
    config = BenchImagesConfig(
        src=args.src, shards=None if remote else args.shards, remote=remote,
        storage_options=_storage_options(args.storage_option), out=args.out, batch_size=args.batch_size, image_size=args.image_size,
        num_workers=args.workers or _default_workers(), epochs=args.epochs, warmup=args.warmup, rounds=args.rounds,
        **({"loaders": tuple(name.strip() for name in args.loaders.split(",") if name.strip())} if args.loaders else {}),
        photo_classes=tuple(name.strip() for name in (args.photo_classes or "").split(",") if name.strip()),
        photo_images=args.photo_images, limit_images=args.limit_images,
    )
    bench_images(config)
    return 0


def _bench_augment(args: argparse.Namespace) -> int:
    from dataio.bench.augment_bench import BenchAugmentConfig, bench_augment

    options = {"device": args.device} if args.device else {}
    bench_augment(BenchAugmentConfig(out=args.out, batch_size=args.batch_size, image_size=args.image_size,
                                     repeats=args.repeats, **options))
    return 0


def _bench_text(args: argparse.Namespace) -> int:
    from dataio.bench.text_bench import BenchTextConfig, bench_text

    bench_text(BenchTextConfig(src=tuple(args.src), shards=args.shards, out=args.out, max_tokens=args.max_tokens,
                               max_length=args.max_length, vocab_size=args.vocab_size,
                               num_workers=args.workers or _default_workers(), epochs=args.epochs))
    return 0


def _bench_sampler(args: argparse.Namespace) -> int:
    from dataio.bench.sampler_bench import BenchSamplerConfig, bench_sampler

    bench_sampler(BenchSamplerConfig(out=args.out, num_samples=args.num_samples, num_shards=args.num_shards))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from dataio.formats.dataset.verify import verify

    report = verify(args.out, deep=args.deep, storage_options=_storage_options(args.storage_option))
    for problem in report.problems:
        print(problem, file=sys.stderr)
    print(report.line())
    return 0 if report.ok else 1


def _world_from_environment() -> dict[str, int]:
    """Rank and world size as torchrun (or SLURM through it) sets them."""
    names = {"world_size": "WORLD_SIZE", "rank": "RANK", "local_rank": "LOCAL_RANK"}
    world = {}
    for field_name, variable in names.items():
        value = os.environ.get(variable)
        if value is not None:
            try:
                world[field_name] = int(value)
            except ValueError:
                raise UsageError(f"{variable}={value!r} is not an integer") from None
    return world


def _named(value: str) -> tuple[str, str] | None:
    """``NAME=REST`` as (name, rest); None for a plain folder (a '/' or ':' before any '=', or no name; write
    ``./x=y`` for a folder named so)."""
    name, sep, rest = value.partition("=")
    return (name, rest) if sep and name and "/" not in name and ":" not in name else None


def _given_twice(names: list[str]) -> str:
    """The names given more than once, comma-separated ('' if none)."""
    return ", ".join(sorted({n for n in names if names.count(n) > 1}))


def _mixture_source(value: str) -> tuple[str, float, str | Path] | None:
    """``NAME=W:PATH`` as (name, weight, folder or URL); None for a plain folder (its name has a '/' or ':' before
    any '='; write ``./x=1:y`` for a folder named so). Unlike ``_named``, an empty name is refused."""
    name, sep, rest = value.partition("=")
    if not sep or "/" in name or ":" in name:
        return None
    weight_text, sep, path = rest.partition(":")
    if not name or not sep or not path.strip():
        raise UsageError(f"--train {value}: a mixture source is NAME=WEIGHT:PATH (the "
                         f"{'name' if not name else 'path'} is missing)")
    try:
        weight = float(weight_text)
    except ValueError:
        raise UsageError(f"--train {value}: the weight {weight_text!r} is not a number") from None
    if not (weight >= 0 and weight != float("inf")):
        raise UsageError(f"--train {value}: the weight must be a finite number >= 0, got {weight_text}")
    folder = _source(path)
    if isinstance(folder, Path) and not folder.exists():
        raise UsageError(f"--train {value}: {folder} does not exist")
    return name, weight, folder


def _train_data(args: argparse.Namespace) -> dict[str, Any]:
    """``train`` (a folder, or a dict of sources), ``weights`` and the epoch rule, from --train, --mixture and
    --epoch-length / --epoch-until (which replace a mixture file's epoch rule)."""
    from dataio.train.mixture_file import read_mixture_file

    values = args.train or []
    if args.mixture is not None and values:
        raise UsageError("give --train or --mixture, not both")
    if args.mixture is not None:
        fields = read_mixture_file(args.mixture)
    elif not values:
        raise UsageError("give --train PATH, --train NAME=W:PATH for each source of a mixture, or --mixture FILE")
    else:
        found = [_mixture_source(value) for value in values]
        specs = [spec for spec in found if spec is not None]
        if not specs:
            if len(values) > 1:
                raise UsageError(f"--train is given {len(values)} times: a mixture's sources are NAME=W:PATH")
            if args.epoch_length is not None or args.epoch_until is not None:
                raise UsageError("--epoch-length and --epoch-until are for a mixture (--train NAME=W:PATH or "
                                 "--mixture FILE)")
            return {"train": _source(values[0])}
        if len(specs) < len(found):
            plain = next(v for v, spec in zip(values, found) if spec is None)
            raise UsageError(f"--train {plain}: a mixture's sources are each NAME=W:PATH, NAME made of letters, "
                             "digits, '_', '.' or '-'")
        twice = _given_twice([name for name, _, _ in specs])
        if twice:
            raise UsageError(f"--train: source {twice} is given twice")
        fields = {"train": {name: folder for name, _, folder in specs},
                  "weights": {name: weight for name, weight, _ in specs}}
    if args.epoch_length is not None or args.epoch_until is not None:
        fields = {key: value for key, value in fields.items() if key not in ("epoch_length", "epoch_until")}
        fields.update(_given(epoch_length=args.epoch_length, epoch_until=args.epoch_until))
    return fields


def _val_data(values: list[str] | None) -> str | Path | dict[str, str | Path] | None:
    """``--val PATH`` once, or ``--val NAME=PATH`` for each named validation set (a name has no '/' or ':')."""
    if not values:
        return None
    named = [_named(value) for value in values]
    if not any(named):
        if len(values) > 1:
            raise UsageError(f"--val is given {len(values)} times: named validation sets are NAME=PATH")
        return _source(values[0])
    if not all(named):
        plain = next(value for value, pair in zip(values, named) if pair is None)
        raise UsageError(f"--val {plain}: give every validation set as NAME=PATH, or one PATH alone")
    twice = _given_twice([name for name, _ in named])
    if twice:
        raise UsageError(f"--val: set {twice} is given twice")
    empty = [name for name, path in named if not path.strip()]
    if empty:
        raise UsageError(f"--val {empty[0]}=: the path is missing")
    return {name: _source(path) for name, path in named}


def _train(args: argparse.Namespace) -> int:
    from dataio.train.config import TrainConfig

    config = TrainConfig(
        **_train_data(args), val=_val_data(args.val), model=args.model, out=args.out, epochs=args.epochs,
        image_size=args.image_size, batch_size=args.batch_size, max_tokens=args.max_tokens,
        block_size=args.block_size, pack=args.pack, optimizer=args.optimizer, lr=args.lr,
        weight_decay=args.weight_decay, warmup=args.warmup, label_smoothing=args.label_smoothing,
        randaugment=args.randaugment, mixup=args.mixup, cutmix=args.cutmix, progressive=args.progressive,
        dynamic_batch=args.dynamic_batch, amp=args.amp, channels_last=not args.no_channels_last,
        compile=args.compile, device=args.device, num_workers=args.workers, cpu_budget=args.cpu_budget,
        profile_steps=args.profile, seed=args.seed,
        checkpoint_every=args.checkpoint_every, resume=args.resume, halt_after_steps=args.halt_after_steps,
        progress_every=args.progress_every, tensorboard=args.tensorboard,
        storage_options=_storage_options(args.storage_option),
        **_world_from_environment())
    from dataio.train.trainer import train  # lazy: torch loads only once the options are valid

    train(config)
    return 0


def _synth_text(args: argparse.Namespace) -> int:
    from dataio.formats.text.synthetic_text import write_text_corpus

    write_text_corpus(args.out, args.documents, seed=args.seed, mean_words=args.mean_words)
    print(f"wrote {args.documents} documents to {args.out}")
    return 0


def _synth(args: argparse.Namespace) -> int:
    from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder

    write_image_folder(args.out, SyntheticImagesConfig(num_classes=args.classes, images_per_class=args.per_class,
                                                       seed=args.seed, photo_class=args.photo_class))
    print(f"wrote {args.classes} x {args.per_class} images to {args.out}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from dataio.bench.demo import DemoConfig, run_demo

    run_demo(DemoConfig(out=args.out, num_classes=args.classes, images_per_class=args.per_class,
                        epochs=args.epochs, num_workers=_default_workers()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    handlers = {("convert", "images"): _convert_images, ("convert", "text"): _convert_text,
                ("bench", "images"): _bench_images,
                ("bench", "augment"): _bench_augment, ("bench", "text"): _bench_text,
                ("bench", "sampler"): _bench_sampler}
    handler = handlers.get((args.command, getattr(args, "kind", None))) or {
        "synth": _synth, "synth-text": _synth_text, "demo": _demo, "train": _train, "verify": _verify,
        "index": _index, "merge": _merge}[args.command]
    try:
        return handler(args)
    except ConfigError as e:  # a library parameter: name the flag that sets it
        print(f"dataio {args.command}: error: {e.for_names(_flag_names(e.parameters))}", file=sys.stderr)
        return 2
    except (UsageError, ValueError) as e:
        print(f"dataio {args.command}: error: {e}", file=sys.stderr)
        return 2
    except DataioError as e:
        print(f"dataio {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the machine, not the data: a file system that failed under us
        where = f"{e.filename}: " if e.filename else ""
        print(f"dataio {args.command}: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C; dataio train's TrainingInterrupted: a signal, at a step boundary
        line = "interrupted" + ("; rerun the same command to resume" if args.command == "convert" else "")
        if getattr(e, "checkpoint", None) is not None:
            line = f"{e.what} at step {e.step}: checkpoint saved to {e.checkpoint}; rerun with --resume to continue"
        print(f"dataio {args.command}: {line}", file=sys.stderr)
        return getattr(e, "exit_code", 130)  # 128 + the signal's number: 130, 143 (SIGTERM), 138 (SIGUSR1)
