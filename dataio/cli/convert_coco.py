"""``dataio convert coco IMAGES ANNOTATIONS.json OUT``: COCO boxes and masks with their images, into shards."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import (add_rank_flags, add_storage, conversion_rank, default_workers, given, positive,
                              run_image_conversion, source)
from dataio.formats.limits import MAX_PIXELS


def add(kinds: argparse._SubParsersAction) -> None:
    """The ``coco`` kind of ``dataio convert``."""
    coco = kinds.add_parser("coco", help="COCO instances (boxes, labels, polygons or RLE masks) and their images "
                                         "-> shards")
    coco.add_argument("images", type=Path, help="the folder the JSON's file_name values are relative to")
    coco.add_argument("annotations", type=Path, help="COCO instances JSON (images, annotations, categories)")
    coco.add_argument("out", type=source, help="a folder, or an s3://, gs://... URL (staged locally, then uploaded)")
    coco.add_argument("--staging", type=Path, help="remote OUT: the local folder it is converted in (default "
                      "~/.cache/dataio/staging/<hash of OUT>, so a rerun resumes)")
    add_storage(coco)
    coco.add_argument("--skip-empty", action="store_true",
                      help="skip images without a good annotation (counted; default: pack them, with no boxes)")
    coco.add_argument("--max-annotations-size", default="2GiB", metavar="SIZE",
                      help="largest annotations JSON read, e.g. 500MB (refused past it, never read past it)")
    coco.add_argument("--shard-size", default="256MB", help="bytes per shard, e.g. 256MB")
    coco.add_argument("--max-shard-samples", type=positive,
                      help="also close a shard after this many samples (default: no limit, only --shard-size)")
    coco.add_argument("--max-side", type=positive, help="downscale so the longer side is at most N, the boxes and "
                      "masks with it (default: full size)")
    coco.add_argument("--quality", type=int, help="re-encode every image at this JPEG quality (default: clean "
                      "JPEGs keep their own encoding)")
    coco.add_argument("--max-pixels", type=positive, default=MAX_PIXELS, help="decompression-bomb limit")
    coco.add_argument("--max-file-size", default="1GiB", metavar="SIZE",
                      help="largest image file read, e.g. 500MB; a larger one is rejected with its size")
    coco.add_argument("--restart-interval", type=int, metavar="MCUS",
                      help="most MCUs between JPEG restart markers (a lossless rewrite; default 2); 0 keeps clean "
                           "JPEGs byte for byte")
    coco.add_argument("--workers", type=positive, help="converter processes (default: DATAIO_NUM_WORKERS, else "
                      "all cores); the output is the same bytes whatever the count")
    coco.add_argument("--strict", action="store_true", help="exit non-zero if any image or annotation is rejected")
    coco.add_argument("--overwrite", action="store_true",
                      help="delete what OUT holds and convert again (default: resume an interrupted run)")
    coco.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    add_rank_flags(coco)


def run(args: argparse.Namespace) -> int:
    from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
    from dataio.formats.images.image_prepare import ImagePrepareConfig
    from dataio.formats.remote.remote_output import default_staging

    config = ConvertCocoConfig(
        images=args.images, annotations=args.annotations,
        out=args.out if isinstance(args.out, Path) else args.staging or default_staging(args.out),
        skip_empty=args.skip_empty, max_annotations_bytes=args.max_annotations_size, shard_size=args.shard_size,
        max_shard_samples=args.max_shard_samples, num_workers=args.workers or default_workers(),
        strict=args.strict, overwrite=args.overwrite, progress=not args.no_progress,
        prepare=ImagePrepareConfig(max_side=args.max_side, quality=args.quality, max_pixels=args.max_pixels,
                                   max_file_size=args.max_file_size, **given(restart_interval=args.restart_interval)),
        **conversion_rank(args))
    return run_image_conversion(args, config, convert_coco)
