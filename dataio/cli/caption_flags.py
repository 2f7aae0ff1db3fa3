"""The flags of image-text pairs that ``dataio index`` and ``dataio convert images`` share: captions, their
longest, and the tokenizer whose ids are stored beside them (as ``dataio convert text`` takes it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dataio.cli.flags import positive
from dataio.formats.pairs.pair_fields import MAX_CAPTION_BYTES
from dataio.formats.errors import UsageError


def add_caption_flags(parser: argparse.ArgumentParser, captions_help: str) -> None:
    parser.add_argument("--captions", action="store_true", help=captions_help)
    parser.add_argument("--max-caption-bytes", type=positive, default=MAX_CAPTION_BYTES,
                        help="pairs: a longer caption is listed in rejected.jsonl and its pair not packed")
    parser.add_argument("--tokenizer", type=Path, metavar="FILE",
                        help="pairs: a HF tokenizers JSON file; each caption's token ids are stored beside it "
                             "(default: captions only, tokenised when read)")
    parser.add_argument("--train-tokenizer", choices=["bpe"],
                        help="pairs: train a byte-level BPE tokenizer on the captions and store their ids "
                             "(default: none)")
    parser.add_argument("--vocab-size", type=positive, default=8192,
                        help="vocabulary size of the tokenizer --train-tokenizer trains (260 to 2**24)")
    parser.add_argument("--bos", default="<s>", help="pairs with a tokenizer: BOS token ('' for none)")
    parser.add_argument("--eos", default="</s>", help="pairs with a tokenizer: EOS token ('' for none)")
    parser.add_argument("--pad", default="<pad>", help="pairs with a tokenizer: padding token (falls back to EOS "
                        "if the tokenizer lacks it)")


def tokenizer_config(args: argparse.Namespace):
    """The ``TokenizerConfig`` the flags ask for, or None (captions stored as text only)."""
    from dataio.formats.text.tokenizer_setup import TokenizerConfig

    if args.tokenizer is None and args.train_tokenizer is None:
        return None
    if args.tokenizer is not None and args.train_tokenizer is not None:
        raise UsageError("give --tokenizer FILE or --train-tokenizer bpe, not both")
    return TokenizerConfig(path=args.tokenizer, train=args.train_tokenizer,
                           vocab_size=args.vocab_size, bos=args.bos or None, eos=args.eos or None, pad=args.pad)
