"""``dataio index``: adopt existing WebDataset tars in place."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.caption_flags import add_caption_flags, tokenizer_config
from dataio.cli.engine import add_engine_flags, run_planned, wants_ray
from dataio.cli.flags import given, positive, source
from dataio.formats.errors import UsageError

def add(commands: argparse._SubParsersAction) -> None:
    """The ``index`` command."""
    index = commands.add_parser("index", help="adopt existing WebDataset tars in place: sample table, DALI "
                                               "indexes and manifest beside them, the tars untouched")
    index.add_argument("shards", type=source, nargs="+", help=".tar files in one folder, or the folder (local, or "
                       "a folder every node of a Ray cluster sees)")
    index.add_argument("--classes", type=Path, help="class names, one per line (line i is label i); default: "
                       "0..K-1")
    index.add_argument("--workers", type=positive, help="indexing threads (default: all cores, at most 8)")
    index.add_argument("--overwrite", action="store_true", help="index a folder that has a manifest again")
    index.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    add_caption_flags(index, "adopt the tars as image-text pairs (KEY.txt captions, KEY.json metadata), whatever "
                             "else they hold (default: pairs when no key has a .cls and some have a .txt)")
    add_engine_flags(index)


def run(args: argparse.Namespace) -> int:
    from dataio.formats.images.wds_index import IndexConfig, index_shards, indexed_folder

    urls = [str(shard) for shard in args.shards if isinstance(shard, str)]
    if urls:  # the index is written beside the tars: a folder it can write in
        raise UsageError(f"{urls[0]}: dataio index adopts tars in a local or shared folder, not a URL yet; copy "
                         "them to a folder (or index them there and upload the folder)")
    ray = wants_ray(args)
    config = IndexConfig(shards=tuple(args.shards), classes_file=args.classes, overwrite=args.overwrite,
                         progress=not args.no_progress, captions=True if args.captions else None,
                         tokenizer=tokenizer_config(args), max_caption_bytes=args.max_caption_bytes,
                         **given(num_workers=args.workers))
    if ray:  # the tars' folder, and a folder indexed already refused, before a cluster is started
        return run_planned(args, "index", config, out=indexed_folder(config)[0])
    print(index_shards(config).line())
    return 0
