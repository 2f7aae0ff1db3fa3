"""``dataio merge``: the rank folders of a multi-node conversion into one dataset."""

from __future__ import annotations

import argparse
from pathlib import Path

def add(commands: argparse._SubParsersAction) -> None:
    """The ``merge`` command."""
    merge = commands.add_parser("merge", help="merge the rank folders of a multi-node conversion into one dataset")
    merge.add_argument("out", type=Path, help="the OUT folder holding rank-R-of-N folders")
    merge.add_argument("--verify", action="store_true",
                       help="also check every shard's sha256 before publishing (default: presence and sizes)")


def run(args: argparse.Namespace) -> int:
    from dataio.formats.ranks.rank_merge import merge_ranks

    manifest = merge_ranks(args.out, verify=args.verify)
    print(f"merged {manifest.options['ranks']} ranks into {args.out}: {manifest.num_samples} samples in "
          f"{len(manifest.shards)} shards")
    return 0
