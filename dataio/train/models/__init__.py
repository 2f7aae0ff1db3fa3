"""Models of ``dataio train``, chosen by name (no torchvision or timm needed)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from dataio.formats.errors import UsageError

from dataio.train.models.resnet import resnet18, resnet50
from dataio.train.models.small_cnn import SmallCNN
from dataio.train.models.small_fcn import SmallFCN
from dataio.train.models.small_gpt import SmallGPT

IMAGE_MODELS: dict[str, Callable[[int], nn.Module]] = {
    "resnet18": resnet18, "resnet50": resnet50, "small_cnn": lambda num_classes: SmallCNN(num_classes),
}
# --task segment: per-pixel logits (N, classes, H, W); small_cnn names the small model of the task, as for images
SEGMENT_MODELS: dict[str, Callable[[int], nn.Module]] = {
    "small_cnn": lambda num_classes: SmallFCN(num_classes), "small_fcn": lambda num_classes: SmallFCN(num_classes),
}
TEXT_MODELS: dict[str, Callable[[int, int], nn.Module]] = {
    "small_gpt": lambda vocab_size, max_length: SmallGPT(vocab_size, max_length=max_length),
    "tiny_gpt": lambda vocab_size, max_length: SmallGPT(vocab_size, dim=64, layers=2, heads=2, max_length=max_length),
}


def build_image_model(name: str, num_classes: int) -> nn.Module:
    if name not in IMAGE_MODELS:
        raise ValueError(f"unknown image model {name!r}; choose from {sorted(IMAGE_MODELS)} "
                         f"(text models: {sorted(TEXT_MODELS)})")
    return IMAGE_MODELS[name](num_classes)


def build_segment_model(name: str, num_classes: int) -> nn.Module:
    if name not in SEGMENT_MODELS:
        raise ValueError(f"unknown segmentation model {name!r} (--task segment); choose from {sorted(SEGMENT_MODELS)}")
    return SEGMENT_MODELS[name](num_classes)


# Past the largest vocabularies in use (256K ids): an embedding of more rows says an id far past the others (a
# pruned vocabulary that kept one id near 2**31), and would ask for hundreds of GB at the model's first layer.
MAX_VOCAB = 1 << 24


def check_vocab(vocab_size: int, where: str) -> None:
    """One line, before any model is built, for a vocabulary whose embedding no machine holds."""
    if vocab_size > MAX_VOCAB:
        raise UsageError(f"{where}: its largest id is {vocab_size - 1:,}, so a text model's embedding would have "
                         f"{vocab_size:,} rows (at most {MAX_VOCAB:,}): renumber the tokenizer's ids (a pruned "
                         "vocabulary keeps its ids)")


def build_text_model(name: str, vocab_size: int, max_length: int) -> nn.Module:
    if name not in TEXT_MODELS:
        raise ValueError(f"unknown text model {name!r}; choose from {sorted(TEXT_MODELS)}")
    check_vocab(vocab_size, "the data's tokenizer")
    return TEXT_MODELS[name](vocab_size, max_length)


def is_text_model(name: str) -> bool:
    return name in TEXT_MODELS
