"""The ``dataio`` command line: each subcommand maps its flags onto a config dataclass, one module per command.

This package is the only place that reads environment variables
(``DATAIO_NUM_WORKERS``: default worker count; ``DATAIO_CPU_TIER``: the crop-resize's
kernels, ``scalar``, ``avx2``, ``avx512`` or ``vbmi``, capped at the CPU's; ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK`` from ``torchrun`` for ``dataio train``; for ``convert --rank/--world-size``
the defaults come from a SLURM array, a SLURM job step or torchrun: ``_conversion_rank``). Bad invocations print one
line and exit 2 (an OUT that exists as a file or cannot be created or
written counts as one); data errors, and output that fails while being
written (disk full), print one line and exit 1; Ctrl-C prints one line and
exits 130 (``dataio train``: SIGTERM 143, SIGUSR1 138, after its checkpoint).

Deliberately lazy: each command imports its stage inside its handler, so
``dataio --help`` and the converters start without importing torch, and
``bench/`` is imported only by the ``bench`` and ``demo`` commands (``cli/bench.py``, ``cli/demo.py``).
"""

from __future__ import annotations

import argparse
import signal
import sys

from dataio import __version__
from dataio.cli import bench, convert, convert_coco, convert_detection, demo, index, merge, synth, train, verify
from dataio.cli.flags import Parser, cpu_tier_applied, flag_names
from dataio.cli.storage_flag import storage_options_of as _storage_options  # noqa: F401  (the tests' name)
from dataio.cli.train import train_data as _train_data  # noqa: F401  (the tests' name)
from dataio.formats.errors import ConfigError, DataioError, UsageError
from dataio.formats.remote.secrets import redact

_HANDLERS = {("convert", "images"): convert.run_images, ("convert", "text"): convert.run_text,
             ("convert", "coco"): convert_coco.run,
             ("convert", "yolo"): convert_detection.run_yolo, ("convert", "voc"): convert_detection.run_voc,
             ("convert", "hub-detection"): convert_detection.run_hub,
             ("bench", "images"): bench.run_images, ("bench", "augment"): bench.run_augment,
             ("bench", "text"): bench.run_text, ("bench", "sampler"): bench.run_sampler,
             ("bench", "detection"): bench.run_detection,
             ("bench", "pairs"): bench.run_pairs, ("bench", "views"): bench.run_views,
             ("merge", None): merge.run, ("index", None): index.run, ("verify", None): verify.run,
             ("train", None): train.run, ("synth-text", None): synth.run_synth_text, ("synth", None): synth.run_synth,
             ("demo", None): demo.run}


def _parser() -> argparse.ArgumentParser:
    """The parser of every command (``python -m dataio.cli_reference`` writes docs/cli.md from it)."""
    parser = Parser(prog="dataio", description="Pack, read and benchmark training data.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in (convert, merge, index, verify, bench, train, synth, demo):
        command.add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``dataio ARGV``; the exit code: 0, 2 for a bad invocation, 1 for bad data, 130 on Ctrl-C."""
    args = _parser().parse_args(argv)
    # the flags given, for a command whose options differ by what they are for (dataio train's tasks)
    args.flags_given = frozenset(token.split("=", 1)[0] for token in (sys.argv[1:] if argv is None else argv)
                                 if token.startswith("--"))
    handler = _HANDLERS[(args.command, getattr(args, "kind", None))]
    try:
        with cpu_tier_applied(getattr(args, "cpu_tier", None)) as notice:
            if notice:
                print(notice, file=sys.stderr)
            return handler(args)
    except ConfigError as e:  # a library parameter: name the flag that sets it (every line redacted: no secret)
        print(redact(f"dataio {args.command}: error: {e.for_names(flag_names(e.parameters))}"), file=sys.stderr)
        return 2
    except (UsageError, ValueError) as e:
        print(redact(f"dataio {args.command}: error: {e}"), file=sys.stderr)
        return 2
    except DataioError as e:
        print(redact(f"dataio {args.command}: {e}"), file=sys.stderr)
        return 1
    except OSError as e:  # the machine, not the data: a file system that failed under us
        where = f"{e.filename}: " if e.filename else ""
        print(redact(f"dataio {args.command}: {where}{e.strerror or e}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C; dataio train's TrainingInterrupted: a signal, at a step boundary
        line = "interrupted" + ("; rerun the same command to resume" if args.command == "convert" else "")
        if getattr(e, "checkpoint", None) is not None:
            line = f"{e.what} at step {e.step}: checkpoint saved to {e.checkpoint}; rerun with --resume to continue"
        print(f"dataio {args.command}: {line}", file=sys.stderr)
        return getattr(e, "exit_code", 130)  # 128 + the signal's number: 130, 143 (SIGTERM), 138 (SIGUSR1)


def entry() -> int:
    """The ``dataio`` script and ``python -m dataio``: ``main()``, then Ctrl-C ignored while the interpreter exits.

    The work is done once ``main`` returns; a Ctrl-C during the teardown that follows (joining a converter's
    worker processes, flushing files) found Python's handlers already removed and killed the process with
    SIGINT, no line printed and exit code -2 for a finished run.
    """
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code
