"""``dataio convert yolo SRC OUT``, ``dataio convert voc SRC OUT`` and ``dataio convert hub-detection SRC OUT``:
other detection layouts, packed as COCO's."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import run_image_conversion
from dataio.cli.packing_flags import add_output_flags, add_packing_flags, packing_options


def add(kinds: argparse._SubParsersAction) -> None:
    """The ``yolo``, ``voc`` and ``hub-detection`` kinds of ``dataio convert``."""
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
    hub = kinds.add_parser("hub-detection", help="Hugging Face detection Parquet (image, objects{bbox, category}) "
                                                 "-> the shards convert coco makes")
    hub.add_argument("src", type=Path, help="a .parquet file, a glob of them or a folder of them (a Hub dataset's "
                     "data/), with an image column and an objects column")
    add_output_flags(hub)
    hub.add_argument("--bbox-format", choices=["coco", "xyxy", "yolo"], default="coco",
                     help="the objects' bbox: coco (x, y, width, height in pixels; cppe-5's), xyxy (pixels) or yolo "
                          "(normalised cx, cy, w, h)")
    hub.add_argument("--classes", type=Path, help="category names, one per line (line i is category i); default: "
                     "the ClassLabel names of the Parquet's Hugging Face features, else the numbers")
    hub.add_argument("--image-column", default="image", help="the image column")
    hub.add_argument("--objects-column", default="objects", help="the column of each row's objects")
    for parser in (yolo, voc, hub):
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


def run_hub(args: argparse.Namespace) -> int:
    from dataio.formats.coco.hub_detection_source import convert_hub_detection, hub_detection_config

    config = hub_detection_config(args.src, bbox_format=args.bbox_format, classes_file=args.classes,
                                  image_column=args.image_column, objects_column=args.objects_column,
                                  skip_empty=args.skip_empty, **packing_options(args))
    return run_image_conversion(args, config, convert_hub_detection)
