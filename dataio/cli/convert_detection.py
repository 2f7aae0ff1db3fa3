"""``dataio convert yolo SRC OUT`` and ``dataio convert voc SRC OUT``: other detection layouts, packed as COCO's."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import run_image_conversion
from dataio.cli.packing_flags import add_output_flags, add_packing_flags, packing_options


def add(kinds: argparse._SubParsersAction) -> None:
    """The ``yolo`` and ``voc`` kinds of ``dataio convert``."""
    yolo = kinds.add_parser("yolo", help="YOLO detection folder (images/, labels/ of 'class cx cy w h') -> the "
                                         "shards convert coco makes")
    yolo.add_argument("src", type=Path, help="the folder holding images/ and labels/ (and data.yaml or classes.txt "
                      "with the class names)")
    add_output_flags(yolo)
    yolo.add_argument("--split", help="the subfolder of images/ and labels/ to pack, e.g. train (needed when "
                      "images/ holds several splits; default: all of images/)")
    voc = kinds.add_parser("voc", help="Pascal VOC folder (JPEGImages/, Annotations/*.xml) -> the shards convert "
                                       "coco makes")
    voc.add_argument("src", type=Path, help="the folder holding JPEGImages/, Annotations/ and ImageSets/Main/ "
                     "(VOCdevkit/VOC2012)")
    add_output_flags(voc)
    voc.add_argument("--split", help="the ImageSets/Main list to pack, e.g. trainval (needed when the folder has "
                     "ImageSets/Main; default: every Annotations/*.xml)")
    for parser in (yolo, voc):
        parser.add_argument("--skip-empty", action="store_true",
                            help="skip images without a good object (counted; default: pack them, with no boxes)")
        add_packing_flags(parser, resized=", the boxes with it", rejected="image",
                          largest_file="largest image file read, e.g. 500MB; a larger one is rejected with its size")


def run_yolo(args: argparse.Namespace) -> int:
    from dataio.formats.coco.yolo_source import convert_yolo, yolo_config

    config = yolo_config(args.src, split=args.split, skip_empty=args.skip_empty, **packing_options(args))
    return run_image_conversion(args, config, convert_yolo)


def run_voc(args: argparse.Namespace) -> int:
    from dataio.formats.coco.voc_source import convert_voc, voc_config

    config = voc_config(args.src, split=args.split, skip_empty=args.skip_empty, **packing_options(args))
    return run_image_conversion(args, config, convert_voc)
