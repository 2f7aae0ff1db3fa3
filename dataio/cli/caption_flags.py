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
    parser.add_argument("--tokenizer", metavar="FILE",
                        help="pairs: a HF tokenizers JSON file, open_clip:MODEL (open_clip's own tokenizer of "
                             "MODEL) or hf:DIR (a local transformers tokenizer folder); each caption's token ids "
                             "are stored beside it, framed as the tokenizer frames them (default: captions only, "
                             "tokenised when read)")
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
    named = named_tokenizer(args.tokenizer) if args.tokenizer is not None else None
    path = Path(args.tokenizer) if args.tokenizer is not None and named is None else None
    return TokenizerConfig(path=path, train=args.train_tokenizer, tokenizer=named,
                           vocab_size=args.vocab_size, bos=args.bos or None, eos=args.eos or None, pad=args.pad)


def named_tokenizer(name: str):
    """The tokenizer ``open_clip:MODEL`` or ``hf:DIR`` names, loaded by its own library (imported here only), or
    None for a file; UsageError in one line when the library is missing, does not know the name, or would fetch
    it from the network (only local tokenizers are taken: nothing is downloaded)."""
    kind, _, rest = name.partition(":")
    if kind not in ("open_clip", "hf") or not rest or Path(name).is_file():
        return None
    try:
        if kind == "open_clip":
            return _open_clip_tokenizer(name, rest)
        if not Path(rest).is_dir():
            raise UsageError(f"--tokenizer {name}: {rest} is not a folder (hf: takes a local transformers "
                             "tokenizer folder, saved by save_pretrained; nothing is downloaded)")
        _check_tokenizer_files(name, Path(rest))
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(rest, local_files_only=True)
    except ImportError as e:
        raise UsageError(f"--tokenizer {name}: {'open_clip_torch' if kind == 'open_clip' else 'transformers'} is "
                         f"not installed ({e})") from None
    except UsageError:
        raise
    except Exception as e:  # the library's own words on a name it does not know
        text = (str(e).strip().splitlines() or [""])[0][:200]
        raise UsageError(f"--tokenizer {name}: {type(e).__name__}: {text}") from None


def _open_clip_tokenizer(name: str, model: str):
    """open_clip's tokenizer of one of its built-in model configs; UsageError for a name open_clip would resolve
    over the network (``hf-hub:``, a config naming a Hub tokenizer, SigLIP's) or from a folder's config."""
    if ":" in model:  # hf-hub:ORG/REPO downloads its config, local-dir:DIR's config may name a Hub tokenizer
        raise UsageError(f"--tokenizer {name}: only open_clip's built-in model names are taken (e.g. "
                         "open_clip:ViT-B-32), not a schema like hf-hub: (nothing is downloaded); for a Hub "
                         "tokenizer saved locally, give hf:DIR")
    import open_clip

    if model not in open_clip.list_models():
        raise UsageError(f"--tokenizer {name}: {model[:80]!r} is not one of open_clip's built-in model configs "
                         "(open_clip.list_models())")
    text = (open_clip.get_model_config(model) or {}).get("text_cfg", {})
    if text.get("hf_tokenizer_name") or "siglip" in model.lower():
        raise UsageError(f"--tokenizer {name}: open_clip would download this model's tokenizer from the Hub "
                         f"({text.get('hf_tokenizer_name') or 'SigLIP'}); nothing is downloaded: save it with "
                         "transformers' save_pretrained and give hf:DIR")
    return open_clip.get_tokenizer(model)


# what transformers reads of a tokenizer folder: its JSON, text and sentencepiece files (weights are never read)
TOKENIZER_SUFFIXES = (".json", ".txt", ".model", ".jinja")


def _check_tokenizer_files(name: str, folder: Path) -> None:
    """UsageError naming the file when one a tokenizer reads (tokenizer.json, vocab.txt, spiece.model...) is past
    ``MAX_TOKENIZER_BYTES``, from its size before anything is read: transformers reads each whole."""
    from dataio.formats.text.tokenizer_setup import MAX_TOKENIZER_BYTES

    for path in sorted(folder.iterdir()):
        if path.name.endswith(TOKENIZER_SUFFIXES) and path.is_file() and path.stat().st_size > MAX_TOKENIZER_BYTES:
            raise UsageError(f"--tokenizer {name}: {path.name} is {path.stat().st_size >> 20} MiB, past the "
                             f"{MAX_TOKENIZER_BYTES >> 20} MiB a tokenizer file may hold (refused unread)")
