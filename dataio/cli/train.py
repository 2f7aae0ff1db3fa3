"""``dataio train``: the trainer's flags, its data (``--train``, ``--mixture``, ``--val``) and torchrun's rank
and world size from the environment."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from dataio.cli.flags import (add_storage, cpu_budget, given, positive, seconds, source, storage_options_of,
                              workers_or_auto)
from dataio.formats.errors import UsageError

def add(commands: argparse._SubParsersAction) -> None:
    """The ``train`` command."""
    fit = commands.add_parser("train", help="train a model on shards (torchrun for DDP)")
    fit.add_argument("--train", action="append", metavar="[NAME=W:]PATH",
                     help="train shards (images or text; a folder or URL); repeat NAME=W:PATH for a mixture of "
                          "sources blended by weights W (default: none; give --train or --mixture)")
    fit.add_argument("--mixture", type=Path, metavar="FILE",
                     help="a mixture file instead of --train: JSON (or YAML with PyYAML) naming the sources, their "
                          "weights or a schedule in fractions of training or steps, and the epoch rule "
                          "(docs/mixtures.md; default: none)")
    fit.add_argument("--epoch-length", type=positive, metavar="UNITS",
                     help="a mixture's epoch: UNITS samples (documents when packing text, batches in budget mode) "
                          "(default: one pass of every source)")
    fit.add_argument("--epoch-until", metavar="NAME",
                     help="a mixture's epoch ends when source NAME (or all: every source) finishes a pass "
                          "(default: one pass of every source)")
    fit.add_argument("--val", action="append", metavar="[NAME=]PATH",
                     help="validation shards (a folder or URL); repeat NAME=PATH for named sets, each evaluated "
                          "and logged apart (val_loss/NAME, ...) beside their total (default: none, no validation)")
    add_storage(fit)
    fit.add_argument("--model", default="small_cnn", help="resnet18, resnet50, small_cnn, small_gpt, tiny_gpt (with "
                     "--task clip: the image tower)")
    fit.add_argument("--task", choices=["auto", "classify", "lm", "clip", "segment"], default="auto",
                     help="classify images, a language model, clip: contrastive image-text training on pair folders, "
                          "or segment: semantic segmentation on the masks of COCO shards (dataio convert coco), "
                          "reporting mean IoU (auto: the task of the kind the train data declare: classify, clip or "
                          "lm; lm with a text model). A flag the task does not use is refused")
    fit.add_argument("--context-length", type=positive, default=77,
                     help="clip: caption tokens kept (the text tower's context)")
    fit.add_argument("--tokenizer", type=Path, metavar="FILE",
                     help="clip: a HF tokenizers JSON file to tokenise captions as they are read (default: the ids "
                          "stored at pack time)")
    fit.add_argument("--epochs", type=positive, default=10, help="epochs to train")
    fit.add_argument("--image-size", type=positive, default=224,
                     help="images: side of the train crops (the end size with --progressive)")
    fit.add_argument("--batch-size", type=positive, default=128, help="per rank (images; rows when packing text)")
    fit.add_argument("--max-tokens", type=positive, default=16384, help="text: tokens per batch (budget mode)")
    fit.add_argument("--block-size", type=positive, default=512, help="text: tokens per packed row")
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
    fit.add_argument("--workers", type=workers_or_auto, help="decode threads per rank, or auto (measured; default: "
                     "one per core)")
    fit.add_argument("--cpu-budget", type=cpu_budget,
                     help="with --workers auto: cores (an integer) or share of them (0-1) for decoding "
                          "(default: all but one)")
    fit.add_argument("--profile", type=positive, nargs="?", const=20, default=0, metavar="STEPS",
                     help="write a torch.profiler trace of STEPS steps (default 20) to OUT/profile")
    fit.add_argument("--seed", type=int, default=0, help="seed of the model's init, the epoch order and augmentation")
    fit.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: per epoch)")
    fit.add_argument("--resume", action="store_true",
                     help="continue from OUT/checkpoint.pt (more --epochs or another --batch-size re-plan the LR)")
    fit.add_argument("--progress-every", type=seconds, default=30.0, metavar="SECONDS",
                     help="seconds between step progress lines when stdout is not a terminal (a bar when it "
                          "is); 0: no step progress (default 30)")
    fit.add_argument("--tensorboard", action="store_true",
                     help="TensorBoard scalars in OUT/tensorboard (needs the tensorboard package)")
    fit.add_argument("--halt-after-steps", type=positive, help=argparse.SUPPRESS)  # fault injection for tests


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
    folder = source(path)
    if isinstance(folder, Path) and not folder.exists():
        raise UsageError(f"--train {value}: {folder} does not exist")
    return name, weight, folder


def train_data(args: argparse.Namespace) -> dict[str, Any]:
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
            return {"train": source(values[0])}
        if len(specs) < len(found):
            plain = next(v for v, spec in zip(values, found, strict=True) if spec is None)
            raise UsageError(f"--train {plain}: a mixture's sources are each NAME=W:PATH, NAME made of letters, "
                             "digits, '_', '.' or '-'")
        twice = _given_twice([name for name, _, _ in specs])
        if twice:
            raise UsageError(f"--train: source {twice} is given twice")
        fields = {"train": {name: folder for name, _, folder in specs},
                  "weights": {name: weight for name, weight, _ in specs}}
    if args.epoch_length is not None or args.epoch_until is not None:
        fields = {key: value for key, value in fields.items() if key not in ("epoch_length", "epoch_until")}
        fields.update(given(epoch_length=args.epoch_length, epoch_until=args.epoch_until))
    return fields


def _val_data(values: list[str] | None) -> str | Path | dict[str, str | Path] | None:
    """``--val PATH`` once, or ``--val NAME=PATH`` for each named validation set (a name has no '/' or ':')."""
    if not values:
        return None
    named = [_named(value) for value in values]
    if not any(named):
        if len(values) > 1:
            raise UsageError(f"--val is given {len(values)} times: named validation sets are NAME=PATH")
        return source(values[0])
    if not all(named):
        plain = next(value for value, pair in zip(values, named, strict=True) if pair is None)
        raise UsageError(f"--val {plain}: give every validation set as NAME=PATH, or one PATH alone")
    twice = _given_twice([name for name, _ in named])
    if twice:
        raise UsageError(f"--val: set {twice} is given twice")
    empty = [name for name, path in named if not path.strip()]
    if empty:
        raise UsageError(f"--val {empty[0]}=: the path is missing")
    return {name: source(path) for name, path in named}


# The flags whose TrainConfig field is not the flag's name with underscores.
FIELD_OF_FLAG = {"--workers": "num_workers", "--no-channels-last": "channels_last", "--profile": "profile_steps",
                 "--storage-option": "storage_options"}


def _fields_given(args: argparse.Namespace) -> frozenset[str]:
    """The TrainConfig fields whose flags the command line gave (a task refuses those it does not honour)."""
    flags = getattr(args, "flags_given", frozenset())
    return frozenset(FIELD_OF_FLAG.get(flag, flag[2:].replace("-", "_")) for flag in flags)


def run(args: argparse.Namespace) -> int:
    from dataio.train.config import TrainConfig

    config = TrainConfig(
        **train_data(args), val=_val_data(args.val), model=args.model, task=args.task,
        context_length=args.context_length, tokenizer=args.tokenizer, out=args.out, epochs=args.epochs,
        image_size=args.image_size, batch_size=args.batch_size, max_tokens=args.max_tokens,
        block_size=args.block_size, pack=args.pack, optimizer=args.optimizer, lr=args.lr,
        weight_decay=args.weight_decay, warmup=args.warmup, label_smoothing=args.label_smoothing,
        randaugment=args.randaugment, mixup=args.mixup, cutmix=args.cutmix, progressive=args.progressive,
        dynamic_batch=args.dynamic_batch, amp=args.amp, channels_last=not args.no_channels_last,
        compile=args.compile, device=args.device, num_workers=args.workers, cpu_budget=args.cpu_budget,
        profile_steps=args.profile, seed=args.seed,
        checkpoint_every=args.checkpoint_every, resume=args.resume, halt_after_steps=args.halt_after_steps,
        progress_every=args.progress_every, tensorboard=args.tensorboard,
        storage_options=storage_options_of(args.storage_option), given=_fields_given(args),
        **_world_from_environment())
    from dataio.train.trainer import train  # lazy: torch loads only once the options are valid

    train(config)
    return 0
