"""``dataio demo``: generate data, convert it, benchmark the loaders (``make demo``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import default_workers, positive

def add(commands: argparse._SubParsersAction) -> None:
    """The ``demo`` command."""
    demo = commands.add_parser("demo", help="generate data, convert it, benchmark the loaders")
    demo.add_argument("--out", type=Path, default=Path("demo-data"),
                      help="folder for the images, their shards and the results (reused by the next run)")
    demo.add_argument("--classes", type=positive, default=10, help="classes of the generated folder")
    demo.add_argument("--per-class", type=positive, default=200, help="images per class")
    demo.add_argument("--epochs", type=positive, default=3, help="timed epochs per loader")


def run(args: argparse.Namespace) -> int:
    from dataio.bench.demo import DemoConfig, run_demo

    run_demo(DemoConfig(out=args.out, num_classes=args.classes, images_per_class=args.per_class,
                        epochs=args.epochs, num_workers=default_workers()))
    return 0
