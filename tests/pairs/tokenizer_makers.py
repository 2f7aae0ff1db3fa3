"""Tokenizers a user might hand dataio, built on the spot: a pruned vocabulary keeping large ids, a regex
pre-tokenizer that panics (``pyo3_runtime.PanicException``) on some captions, two of one size with other ids."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Regex, Tokenizer, models, pre_tokenizers
from tokenizers.processors import TemplateProcessing

PRUNED_TOP = 70001  # the pruned vocabulary's largest id ("</s>"): past uint16, though it has ~300 entries
# Backtracks past Oniguruma's retry limit on the text after "square" (no digit ever matches): a Rust panic
PANIC_ON_SQUARE = r"square((\S|\s)+)+\d"
PANIC_ON_ALL = r"((\S|\s)+)+\d"


def pruned_tokenizer(path: Path) -> Path:
    """A WordLevel tokenizer of 300 entries whose ids run up to ``PRUNED_TOP`` (a pruned vocabulary)."""
    words = ("a an the on of and against showing picture photo background red green blue yellow black white "
             "purple orange circle square triangle cross").split()
    vocab = {f"filler{i}": 1000 + 233 * i for i in range(300 - len(words) - 4)}
    vocab.update({word: 40000 + 7 * i for i, word in enumerate(words)})
    vocab.update({"<pad>": 0, "[UNK]": 69000, "<s>": PRUNED_TOP - 1, "</s>": PRUNED_TOP})
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def word_tokenizer(path: Path | None = None, *, shift: int = 0, end: bool = False, pattern: str | None = None):
    """A WordLevel tokenizer of the synthetic captions' words (ids shifted by ``shift``: same size, other ids),
    appending ``</s>`` when ``end``, split by the regex ``pattern`` when given; saved to ``path`` if given."""
    words = ("<pad> <s> </s> [UNK] a an the on of and against showing picture photo background red green blue "
             "yellow black white purple orange circle square triangle cross , ").split()
    vocab = {word: (i + shift) % len(words) for i, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = (pre_tokenizers.Split(Regex(pattern), behavior="isolated") if pattern
                               else pre_tokenizers.Whitespace())
    if end:
        tokenizer.post_processor = TemplateProcessing(single="$A </s>", special_tokens=[("</s>", vocab["</s>"])])
    if path is not None:
        tokenizer.save(str(path))
    return tokenizer


def panics(tokenizer, caption: str) -> bool:
    """Whether ``tokenizer`` panics encoding ``caption``."""
    try:
        tokenizer.encode(caption)
    except BaseException as e:  # pyo3_runtime.PanicException is a BaseException
        if type(e).__name__ != "PanicException":
            raise
        return True
    return False


def bert_style_tokenizer(path: Path) -> Path:
    """A WordLevel tokenizer of the synthetic captions' words whose own post-processor frames each text as BERT's
    does (``[CLS] $A [SEP]``), with none of ``<s>``/``</s>``: pack time's ``--bos``/``--eos`` cannot frame it."""
    words = ("[PAD] [UNK] a an the on of and against showing picture photo background red green blue yellow black "
             "white purple orange circle square triangle cross , [CLS] [SEP]").split()
    vocab = {word: i for i, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[
        ("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    tokenizer.save(str(path))
    return path
