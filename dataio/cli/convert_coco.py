"""``dataio convert coco IMAGES ANNOTATIONS.json OUT``: COCO boxes and masks with their images, into shards."""

from __future__ import annotations

import argparse

from dataio.cli.engine import add_engine_flags, run_planned, wants_ray
from dataio.cli.flags import run_image_conversion, source, source_options
from dataio.cli.packing_flags import add_output_flags, add_packing_flags, packing_options


def add(kinds: argparse._SubParsersAction) -> None:
    """The ``coco`` kind of ``dataio convert``."""
    coco = kinds.add_parser("coco", help="COCO instances or person_keypoints (boxes, labels, polygons or RLE masks, "
                                         "keypoints) and their images -> shards",
                            description="COCO instances or person_keypoints JSON and their images -> shards. A "
                                        "person_keypoints file's keypoints (x, y, visibility for each name its "
                                        "categories list) are packed with their boxes, the names and skeleton in the "
                                        "manifest; a bad keypoints list rejects its annotation in one line.")
    coco.add_argument("images", type=source, help="the folder the JSON's file_name values are relative to (a "
                                                  "folder, or a URL: s3://..., https://...)")
    coco.add_argument("annotations", type=source, help="COCO instances or person_keypoints JSON (images, "
                                                       "annotations, categories; LVIS's coco_url where file_name is "
                                                       "absent); a file or a URL")
    add_output_flags(coco)
    coco.add_argument("--skip-empty", action="store_true",
                      help="skip images without a good annotation (counted; default: pack them, with no boxes)")
    coco.add_argument("--max-annotations-size", default="2GiB", metavar="SIZE",
                      help="largest annotations JSON read, e.g. 500MB (refused past it, never read past it)")
    add_packing_flags(coco, resized=", the boxes and masks with it", rejected="image or annotation",
                      largest_file="largest image file read, e.g. 500MB; a larger one is rejected with its size")
    add_engine_flags(coco)


def run(args: argparse.Namespace) -> int:
    from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco

    config = ConvertCocoConfig(images=args.images, annotations=args.annotations, skip_empty=args.skip_empty,
                               max_annotations_bytes=args.max_annotations_size, **packing_options(args),
                               **source_options(args, args.images, args.annotations))
    if wants_ray(args):
        return run_planned(args, "coco", config, strict=config.strict)
    return run_image_conversion(args, config, convert_coco)
