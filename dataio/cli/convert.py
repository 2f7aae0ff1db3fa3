"""``dataio convert images`` and ``dataio convert text``: pack a source folder or corpus into shards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dataio.cli import convert_coco, convert_detection
from dataio.cli.engine import add_engine_flags, run_planned, wants_ray
from dataio.cli.caption_flags import add_caption_flags, tokenizer_config
from dataio.cli.flags import (add_rank_flags, add_storage, conversion_rank, given, local_for_ranks,
                              maybe_remote, positive, run_image_conversion, source,
                              source_options)
from dataio.cli.packing_flags import add_output_flags, add_packing_flags, packing_options
from dataio.formats.errors import UsageError

def add(commands: argparse._SubParsersAction) -> None:
    """The ``convert`` command and its two kinds."""
    convert = commands.add_parser("convert", help="pack a source folder or corpus into shards")
    kinds = convert.add_subparsers(dest="kind", required=True)
    images = kinds.add_parser("images", help="ImageNet-layout folder, or Hugging Face Parquet files -> shards")
    images.add_argument("src", type=source, help="an ImageNet-layout folder (SRC/<class>/<image>; with --kind views "
                        "any folder of images), or Hugging Face Parquet files: a .parquet file, a glob or a folder "
                        "of them; local, or a URL (s3://..., a Parquet file at https://...)")
    add_output_flags(images)
    images.add_argument("--format", choices=["wds", "arrow"], default="wds",
                        help="wds: WebDataset tars; arrow: Arrow IPC in the Hugging Face image layout")
    images.add_argument("--kind", dest="sample_kind", choices=["classification", "pairs", "views"],
                        help="the kind of sample packed: classification (class folders, or a label column; the "
                             "default), pairs (as --captions), views (every image of a folder of any layout, or a "
                             "Parquet image column, without classes: for multi-crop self-supervised loaders)")
    images.add_argument("--classes", type=Path, help="class names, one per line (line i is label i); default: "
                        "the folder names, or a Parquet source's Hugging Face features")
    images.add_argument("--image-column", help="Parquet sources: the image column (default image)")
    images.add_argument("--label-column", help="Parquet sources: the label column (default label)")
    add_caption_flags(images, "pack image-text pairs: a folder of images each with its caption in NAME.txt beside "
                              "it, or Parquet files with a caption column (no classes)")
    images.add_argument("--caption-column", help="Parquet sources of pairs: the caption column (implies "
                        "--captions; default caption)")
    add_packing_flags(images, resized="", rejected="file",
                      largest_file="largest source file (or Parquet row's image) read, e.g. 500MB; a larger one is "
                                   "rejected with its size, never read past the limit")
    add_engine_flags(images)

    text = kinds.add_parser("text", help="text corpus -> pre-tokenised Arrow (or WebDataset) shards")
    text.add_argument("src", type=source, nargs="+",
                      help=".txt/.jsonl/.parquet files or folders, local or URLs (s3://bucket/corpus/*.jsonl, "
                      "https://.../file.parquet), then OUT (a folder or an s3://... URL)")
    text.add_argument("--staging", type=Path, help="remote OUT: the local folder it is converted in (default "
                      "~/.cache/dataio/staging/<hash of OUT>, so a rerun resumes)")
    add_storage(text)
    text.add_argument("--tokenizer", type=Path, help="a HF tokenizers JSON file (default: none; give it or "
                      "--train-tokenizer)")
    text.add_argument("--train-tokenizer", choices=["bpe"], help="train a byte-level BPE tokenizer on SRC "
                      "(default: none; give it or --tokenizer)")
    text.add_argument("--vocab-size", type=positive, default=8192,
                      help="vocabulary size of the tokenizer --train-tokenizer trains (260 to 2**24)")
    text.add_argument("--bos", default="<s>", help="BOS token ('' for none)")
    text.add_argument("--eos", default="</s>", help="EOS token ('' for none)")
    text.add_argument("--pad", default="<pad>", help="padding token (falls back to EOS if the tokenizer lacks it)")
    text.add_argument("--doc-sep", choices=["line", "blank"], default="line",
                      help=".txt sources: one document per line, or per paragraph (blank-line separated)")
    text.add_argument("--field", default="text", help="field of .jsonl records / column of .parquet files")
    text.add_argument("--max-length", type=positive, default=2048, help="longer documents are split into chunks")
    text.add_argument("--format", choices=["arrow", "wds"], default="arrow",
                      help="arrow: memory-mappable Arrow IPC shards; wds: the same rows as WebDataset .npy members")
    text.add_argument("--shard-tokens", type=positive, default=50_000_000, help="tokens per shard")
    text.add_argument("--overwrite", action="store_true",
                      help="delete what OUT holds and convert again (default: resume an interrupted run)")
    text.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    add_rank_flags(text)
    add_engine_flags(text)
    text.add_argument("--tokenizer-wait", type=float, metavar="SECONDS",
                      help="how long a rank > 0 waits for the tokenizer rank 0 trains (default 3600)")
    convert_coco.add(kinds)
    convert_detection.add(kinds)


def run_images(args: argparse.Namespace) -> int:
    from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images

    config = ConvertImagesConfig(
        src=args.src, format=args.format, classes_file=args.classes,
        **given(image_column=args.image_column, label_column=args.label_column, caption_column=args.caption_column,
                kind=args.sample_kind),
        captions=args.captions or args.caption_column is not None, tokenizer=tokenizer_config(args),
        max_caption_bytes=args.max_caption_bytes, **packing_options(args), **source_options(args, args.src))
    if wants_ray(args):
        return run_planned(args, "images", config, strict=config.strict)
    return run_image_conversion(args, config, convert_images)


def run_text(args: argparse.Namespace) -> int:
    from dataio.formats.text.text_convert import convert_text
    from dataio.formats.text.tokenizer_setup import TokenizerConfig

    if len(args.src) < 2:
        raise UsageError("give at least one source and the output folder: dataio convert text SRC... OUT")
    *sources, out = args.src
    tokenizer = TokenizerConfig(path=args.tokenizer, train=args.train_tokenizer, vocab_size=args.vocab_size,
                                bos=args.bos or None, eos=args.eos or None, pad=args.pad)
    if wants_ray(args):
        config = _text_config(args, sources, out if isinstance(out, Path) else Path("."), tokenizer,
                              {"rank": 0, "world_size": 1})
        return run_planned(args, "text", config, out=out)
    ranks = conversion_rank(args)
    local_for_ranks(out, ranks)

    def run(folder: Path):
        return convert_text(_text_config(args, sources, folder, tokenizer, ranks))

    summary = maybe_remote(args, out, run, tuple(sources))
    if summary is None:
        return 0
    for kind, examples in sorted(summary.examples.items()):
        print(f"skipped ({kind}): {', '.join(examples)}{' ...' if summary.skipped[kind] > len(examples) else ''}",
              file=sys.stderr)
    print(summary.line())
    return 0


def _text_config(args: argparse.Namespace, sources: list, out: Path, tokenizer, ranks: dict[str, int]):
    from dataio.formats.text.text_convert import ConvertTextConfig

    return ConvertTextConfig(
        sources=tuple(sources), out=out, tokenizer=tokenizer, doc_sep=args.doc_sep, field=args.field,
        max_length=args.max_length, format=args.format, shard_tokens=args.shard_tokens,
        overwrite=args.overwrite, progress=not args.no_progress, **ranks, **source_options(args, *sources),
        **given(tokenizer_wait=args.tokenizer_wait))
