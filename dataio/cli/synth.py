"""``dataio synth`` and ``dataio synth-text``: generate an image folder or a text corpus to try things on."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import positive

def add(commands: argparse._SubParsersAction) -> None:
    """The ``synth-text`` and ``synth`` commands."""
    synth_text = commands.add_parser("synth-text", help="generate a text corpus with a natural length spread")
    synth_text.add_argument("out", type=Path, help="output .txt file")
    synth_text.add_argument("--documents", type=positive, default=20000, help="documents to write, one per line")
    synth_text.add_argument("--mean-words", type=positive, default=250, help="mean words per document")
    synth_text.add_argument("--seed", type=int, default=0, help="seed of the generator: same seed, same file")

    synth = commands.add_parser("synth", help="generate a small ImageNet-layout folder")
    synth.add_argument("out", type=Path, help="output folder: OUT/<class>/<image>.jpg")
    synth.add_argument("--classes", type=positive, default=10, help="class folders to write")
    synth.add_argument("--per-class", type=positive, default=200, help="images per class")
    synth.add_argument("--seed", type=int, default=0, help="seed of the generator: same seed, same images")
    synth.add_argument("--photo-class", choices=("small", "imagenet", "camera"), default="small",
                       help="photo sizes: small ~50 KB, imagenet ~110 KB, camera 5-12 MP ~2-4 MB (default: small)")


def run_synth_text(args: argparse.Namespace) -> int:
    from dataio.formats.text.synthetic_text import write_text_corpus

    write_text_corpus(args.out, args.documents, seed=args.seed, mean_words=args.mean_words)
    print(f"wrote {args.documents} documents to {args.out}")
    return 0


def run_synth(args: argparse.Namespace) -> int:
    from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder

    write_image_folder(args.out, SyntheticImagesConfig(num_classes=args.classes, images_per_class=args.per_class,
                                                       seed=args.seed, photo_class=args.photo_class))
    print(f"wrote {args.classes} x {args.per_class} images to {args.out}")
    return 0
