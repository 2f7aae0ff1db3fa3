"""What several commands share: flag types and groups, the flag of a library parameter, the options given,
the remote OUT of a converter, the rank of a conversion from SLURM or torchrun (environment variables are read
here and in ``train``, nowhere else in dataio)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dataio.cli.storage_flag import HELP as STORAGE_HELP, storage_options_of
from dataio.formats.errors import UsageError
from dataio.formats.jpeg.cpu_tier import STALE, TIERS, stale, tier_in_use, use_tier

def default_workers() -> int:
    value = os.environ.get("DATAIO_NUM_WORKERS")
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise UsageError(f"DATAIO_NUM_WORKERS={value!r} is not an integer") from None
    return os.cpu_count() or 1


def apply_cpu_tier(flag: str | None) -> str | None:
    """Cap the crop-resize's CPU tier at ``flag`` (``--cpu-tier``), else at ``DATAIO_CPU_TIER`` where set
    (``dataio.formats.jpeg.cpu_tier``); a cap above this CPU's prints one line saying the tier used, and so does a
    tier asked where PIL does the crop-resize (``turbo_decode.RESIZE_IN_C``: no tier runs). Returns the line to
    print, or None."""
    wanted = flag or os.environ.get("DATAIO_CPU_TIER") or None
    if wanted is None:
        return None
    source = "--cpu-tier" if flag else "DATAIO_CPU_TIER"
    if wanted not in TIERS:
        shown = repr(wanted) if len(wanted) <= 40 else f"{wanted[:40]!r}... ({len(wanted):,} characters)"
        raise UsageError(f"{source}={shown} is not a tier: one of {', '.join(TIERS)}")
    from dataio.images.turbo_decode import RESIZE_IN_C  # lazy: numpy and PIL, only where a tier is asked

    if stale():
        raise UsageError(f"{source}={wanted}: {STALE}")
    used = use_tier(wanted)
    if not RESIZE_IN_C:  # plain Pillow or no extension: the loader resizes with PIL, no tier runs
        return (f"dataio: {source}={wanted}: the crop-resize here is PIL's (not pillow-simd, or the extension is not "
                "built): the tier changes nothing")
    if used != wanted:
        return f"dataio: {source}={wanted}: this CPU's highest tier is {used}; the crop-resize runs {used}"
    return None


@contextlib.contextmanager
def cpu_tier_applied(flag: str | None) -> Iterator[str | None]:
    """``apply_cpu_tier(flag)`` for one command, the process's tier put back after it: ``main()`` called in-process
    (a script, a notebook, the tests) leaves no cap for its later calls. Yields the line to print, or None."""
    before = tier_in_use()
    try:
        yield apply_cpu_tier(flag)
    finally:
        if before in TIERS:  # not "unknown": a stale extension, whose tier cannot be set
            use_tier(before)


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {text}")
    return value


def workers_or_auto(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0 or auto, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0 or auto, got {value}")
    return value


def cpu_budget(text: str) -> int | float:
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


def add_rank_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rank", type=int, help="this process's share of a multi-node conversion (default: "
                        "SLURM_ARRAY_TASK_ID, SLURM_PROCID or RANK)")
    parser.add_argument("--world-size", type=int, help="number of processes sharing the conversion (default: "
                        "SLURM_ARRAY_TASK_COUNT, SLURM_NTASKS or WORLD_SIZE; else 1)")


# (rank, world size) variables, in order of precedence: a SLURM array, a SLURM job step, torchrun
RANK_VARIABLES = (("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"), ("SLURM_PROCID", "SLURM_NTASKS"),
                   ("RANK", "WORLD_SIZE"))


def conversion_rank(args: argparse.Namespace) -> dict[str, int]:
    """``rank`` and ``world_size`` for a converter: the flags, else the first pair of variables set."""
    rank, world_size = args.rank, args.world_size
    for rank_name, size_name in RANK_VARIABLES:
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


def source_options(args: argparse.Namespace, *sources: object) -> dict[str, object]:
    """``storage_options`` for a converter whose sources include a URL (the per-prefix ones pick theirs)."""
    if not any(isinstance(s, str) for s in sources):
        return {}
    return {"storage_options": storage_options_of(args.storage_option)}


def source(text: str) -> str | Path:
    """A folder argument: an fsspec URL (``s3://...``, ``https://...``) stays a string, anything else a Path."""
    return text if "://" in text and not text.startswith("file://") else Path(text)


def local_for_ranks(out: str | Path, ranks: dict[str, int]) -> None:
    """A multi-node conversion merges its ranks' folders in OUT: OUT must be a folder all ranks share."""
    if isinstance(out, str) and ranks["world_size"] > 1:
        raise UsageError("--world-size > 1 needs OUT on a file system all ranks share (each rank writes "
                         "OUT/rank-R-of-N, the last merges); convert there, then copy the result to the URL")


def add_storage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage-option", action="append", metavar="KEY=VALUE", help=STORAGE_HELP)


class HelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to an option's help unless its help already speaks of the default, or the
    default is None (the help then says what happens) or False (a flag, off unless given)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text.lower() and action.default is not None and action.default is not False
                and action.default != argparse.SUPPRESS
                and (action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE))):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """The parser of ``dataio`` and of each subcommand (``add_subparsers`` makes its own class): defaults shown."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


# Library parameters whose flag is not ``--`` + the name with dashes.
FLAGS = {"path": "--tokenizer", "train": "--train-tokenizer", "overwrite=True": "--overwrite",
          "bos=None": "--bos ''", "eos=None": "--eos ''", "num_workers": "--workers",
          "storage_options": "--storage-option", "channels_last=False": "--no-channels-last"}


def flag_names(parameters: tuple[str, ...]) -> dict[str, str]:
    """The flag that sets each library parameter, for error messages."""
    return {p: FLAGS.get(p, "--" + p.replace("_", "-")) for p in parameters}


def given(**options: object) -> dict[str, object]:
    """The options given on the command line (not None); the others keep the config's defaults."""
    return {name: value for name, value in options.items() if value is not None}


def maybe_remote(args: argparse.Namespace, out: str | Path, run, sources: tuple = ()):
    """``run(out)`` for a local OUT; for a URL, run it in the staging folder and upload (manifest last).
    ``sources``: the command's sources; one that is a URL takes ``--storage-option`` too, with a local OUT."""
    if not isinstance(out, str):
        if args.staging:
            raise UsageError("--staging is for a remote OUT (an s3://... URL)")
        if args.storage_option and not any(isinstance(s, str) for s in sources):
            raise UsageError("--storage-option and --staging are for a remote OUT or a remote source (an s3://... "
                             "URL)")
        return run(out)
    from dataio.formats.dataset.remote_output import convert_to_remote, default_staging

    staging = args.staging or default_staging(out)
    summary, sent = convert_to_remote(out, run, storage_options=storage_options_of(args.storage_option),
                                      staging=staging)
    if summary is None:
        print(f"{staging} was already converted; uploaded {sent} missing file(s) to {out}")
    else:
        print(f"uploaded {sent} file(s) from {staging} to {out}")
    return summary


def run_image_conversion(args: argparse.Namespace, config: Any, convert: Callable[[Any], Any]) -> int:
    """Run an image converter (``convert images``, ``convert coco``) on ``config`` into ``args.out``, local or
    remote; each rejected file on stderr, the summary on stdout; exit 1 under ``--strict`` when any was rejected."""
    local_for_ranks(args.out, {"world_size": config.world_size})
    sources = tuple(getattr(args, name) for name in ("src", "images", "annotations") if hasattr(args, name))
    summary = maybe_remote(args, args.out, lambda out: convert(dataclasses.replace(config, out=out)), sources)
    if summary is None:
        return 0
    for rejected in summary.rejected:
        print(f"rejected {rejected['path']}: {rejected['reason']}", file=sys.stderr)
    print(summary.line())
    return 1 if config.strict and summary.num_rejected else 0
