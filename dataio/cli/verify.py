"""``dataio verify``: check a shard folder (checksums, counts, decodability)."""

from __future__ import annotations

import argparse
import sys

from dataio.cli.flags import add_storage, source, storage_options_of

def add(commands: argparse._SubParsersAction) -> None:
    """The ``verify`` command."""
    check = commands.add_parser("verify", help="check a shard folder: checksums, counts, decodability")
    check.add_argument("out", type=source, help="a shard folder, or its s3://, gs://, https:// URL")
    add_storage(check)
    check.add_argument("--deep", action="store_true", help="decode every image / check every token id")


def run(args: argparse.Namespace) -> int:
    from dataio.formats.dataset.verify import verify

    report = verify(args.out, deep=args.deep, storage_options=storage_options_of(args.storage_option))
    for problem in report.problems:
        print(problem, file=sys.stderr)
    print(report.line())
    return 0 if report.ok else 1
