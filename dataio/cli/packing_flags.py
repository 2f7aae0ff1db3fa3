"""The flags every image packer takes (``convert images``, ``convert coco``): output, shards, re-encoding,
limits, workers, resume, ranks; declared once so the two commands cannot drift apart."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from dataio.cli.flags import add_rank_flags, add_storage, conversion_rank, default_workers, given, positive, source
from dataio.formats.limits import MAX_PIXELS


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """OUT (a folder or a URL), its staging folder, and the storage options."""
    parser.add_argument("out", type=source, help="a folder, or an s3://, gs://... URL (staged locally, then uploaded)")
    parser.add_argument("--staging", type=Path, help="remote OUT: the local folder it is converted in (default "
                        "~/.cache/dataio/staging/<hash of OUT>, so a rerun resumes)")
    add_storage(parser)


def add_packing_flags(parser: argparse.ArgumentParser, *, resized: str, largest_file: str, rejected: str) -> None:
    """Shards, re-encoding, limits, workers, strictness, resume and ranks; ``resized`` ends --max-side's help,
    ``largest_file`` is --max-file-size's, ``rejected`` what --strict counts."""
    parser.add_argument("--shard-size", default="256MB", help="bytes per shard, e.g. 256MB")
    parser.add_argument("--max-shard-samples", type=positive,
                        help="also close a shard after this many samples (default: no limit, only --shard-size)")
    parser.add_argument("--max-side", type=positive, help=f"downscale so the longer side is at most N{resized} "
                        "(default: full size)")
    parser.add_argument("--quality", type=int, help="re-encode every image at this JPEG quality (default: "
                        "clean JPEGs keep their own encoding)")
    parser.add_argument("--max-pixels", type=positive, default=MAX_PIXELS, help="decompression-bomb limit")
    parser.add_argument("--max-file-size", default="1GiB", metavar="SIZE", help=largest_file)
    parser.add_argument("--restart-interval", type=int, metavar="MCUS",
                        help="most MCUs between JPEG restart markers, so the loader can cut a crop out before "
                             "decoding (a lossless rewrite; default 2); 0 keeps clean JPEGs byte for byte")
    parser.add_argument("--workers", type=positive, help="converter processes (default: DATAIO_NUM_WORKERS, "
                        "else all cores); the output is the same bytes whatever the count")
    parser.add_argument("--strict", action="store_true", help=f"exit non-zero if any {rejected} is rejected")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete what OUT holds and convert again (default: resume an interrupted run)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    add_rank_flags(parser)


def packing_options(args: argparse.Namespace) -> dict[str, Any]:
    """The config keywords of ``add_output_flags`` and ``add_packing_flags`` (a remote OUT is converted in its
    staging folder first)."""
    from dataio.formats.images.image_prepare import ImagePrepareConfig
    from dataio.formats.dataset.remote_output import default_staging

    return dict(
        out=args.out if isinstance(args.out, Path) else args.staging or default_staging(args.out),
        shard_size=args.shard_size, max_shard_samples=args.max_shard_samples,
        num_workers=args.workers or default_workers(), strict=args.strict, overwrite=args.overwrite,
        progress=not args.no_progress,
        prepare=ImagePrepareConfig(max_side=args.max_side, quality=args.quality, max_pixels=args.max_pixels,
                                   max_file_size=args.max_file_size, **given(restart_interval=args.restart_interval)),
        **conversion_rank(args))
