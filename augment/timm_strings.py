"""timm's RandAugment strings (``rand-m9-mstd0.5-inc1``) as a config of dataio's batched timm RandAugment.

Parsed as timm's ``rand_augment_transform`` parses them (timm/data/auto_augment.py, timm 1.0): sections
``m`` (int magnitude, default 10), ``n`` (int ops per image, default 2), ``p`` (probability that each
drawn op is applied, default 0.5), ``mstd`` (Gaussian noise on the magnitude per application; above 100:
uniform in [0, m]), ``mmax`` (the magnitude's upper clip, default 10) and ``inc`` (the "increasing" op set,
whose severity grows with the magnitude; as in timm, any ``inc`` section turns it on, ``inc0`` included,
because timm tests ``bool("0")``). What dataio cannot do is refused in one line naming the section: other
policies (``original``, ``v0``, ``augmix``), timm's weighted op sets (``t...``) and the removed ``w``, and more
than ``MAX_OPS`` (32) ops per image (timm has no bound; dataio's cost and memory grow with ``n``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from dataio.formats.errors import ConfigError

TIMM_OPS = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
            "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
INCREASING = ("Posterize", "Solarize", "Color", "Contrast", "Brightness", "Sharpness")  # timm's "...Increasing"
LEVEL_DENOM = 10.0  # timm's _LEVEL_DENOM: magnitudes are on a 0-10 scale
# Ops per image at most: each is a pass over the batch and a column of the (N, num_ops) draws, so 'rand-n10**15'
# asked petabytes and 'rand-n100000' ran for minutes; timm has no bound, its recipes use 2-4.
MAX_OPS = 32


@dataclass(frozen=True, kw_only=True)
class TimmRandAugmentConfig:
    """timm's RandAugment: ``num_ops`` ops drawn with replacement from timm's 15, each applied with ``prob``."""

    num_ops: int = 2
    magnitude: float = 10.0
    magnitude_std: float = 0.0  # math.inf: uniform in [0, magnitude]
    magnitude_max: float | None = None  # None: 10
    prob: float = 0.5
    increasing: bool = False
    translate_pct: float = 0.45  # timm's hparams default for TranslateXRel/YRel
    fill: tuple[float, float, float] = (128.0, 128.0, 128.0)  # timm's img_mean (create_transform: the mean * 255)
    interpolation: Literal["bilinear", "nearest"] = "bilinear"  # timm draws bilinear or bicubic per op
    output: Literal["uint8", "float"] = "uint8"

    def __post_init__(self) -> None:
        if isinstance(self.num_ops, bool) or not isinstance(self.num_ops, int) or not 0 <= self.num_ops <= MAX_OPS:
            raise ConfigError(f"{{0}} must be an int in [0, {MAX_OPS}] (ops per image), got {self.num_ops!r:.40}",
                              "num_ops")
        if self.magnitude < 0 or self.magnitude_std < 0:
            raise ConfigError("{0} and magnitude_std must be >= 0", "magnitude")
        if self.magnitude_max is not None and self.magnitude_max <= 0:
            raise ConfigError(f"{{0}} must be > 0, got {self.magnitude_max}", "magnitude_max")
        if not 0 <= self.prob <= 1:
            raise ConfigError(f"{{0}} must be a probability, got {self.prob}", "prob")
        if len(self.fill) != 3 or not all(0 <= value <= 255 for value in self.fill):
            raise ConfigError(f"{{0}} must be 3 values in [0, 255], got {self.fill}", "fill")
        if self.interpolation not in ("bilinear", "nearest") or self.output not in ("uint8", "float"):
            raise ConfigError("{0} is bilinear|nearest, output is uint8|float", "interpolation")

    @property
    def ops(self) -> tuple[str, ...]:
        """The op names as timm's RandAugment lists them (``..Increasing`` with ``increasing``)."""
        return tuple(f"{name}Increasing" if self.increasing and name in INCREASING else name for name in TIMM_OPS)

    @classmethod
    def from_timm(cls, config_str: str, **options: object) -> "TimmRandAugmentConfig":
        """The config of timm's ``rand_augment_transform(config_str, {})``; ``options`` set the other fields."""
        return cls(**parse_timm_randaugment(config_str), **options)  # type: ignore[arg-type]


def parse_timm_randaugment(config_str: str) -> dict[str, object]:
    """``config_str``'s fields as timm parses them, or a ConfigError naming the section dataio cannot do."""
    where = f"auto_augment {config_str!r}"
    if not isinstance(config_str, str) or not config_str:
        raise ConfigError(f"{{0}} must be a timm RandAugment string such as 'rand-m9-mstd0.5', got {config_str!r}",
                          "auto_augment")
    sections = config_str.split("-")
    if sections[0] != "rand":
        raise ConfigError(f"{{0}}: policy {sections[0]!r} is not batched in dataio; only timm's RandAugment "
                          "strings ('rand-...') are", where)
    fields: dict[str, object] = {}
    for section in sections[1:]:
        if section.startswith("t"):
            raise ConfigError(f"{{0}}: section {section!r} picks timm's weighted or '3a' op set, which dataio "
                              "does not implement; leave it out for the uniform set", where)
        parts = re.split(r"(\d.*)", section)
        if len(parts) < 2:
            raise ConfigError(f"{{0}}: section {section!r} has no number (timm ignores it); remove it", where)
        key, value = parts[:2]
        try:
            if key == "mstd":
                std = float(value)
                fields["magnitude_std"] = math.inf if std > 100 else std
            elif key == "mmax":
                fields["magnitude_max"] = float(int(value))
            elif key == "inc":
                fields["increasing"] = True  # timm: bool(value) of a non-empty string
            elif key == "m":
                fields["magnitude"] = float(int(value))
            elif key == "n":
                fields["num_ops"] = int(value)
                if fields["num_ops"] > MAX_OPS:
                    raise ConfigError(f"{{0}}: section {section!r} asks {value} ops per image; dataio applies at "
                                      f"most {MAX_OPS} (timm's recipes use 2-4)", where)
            elif key == "p":
                fields["prob"] = float(value)
            else:
                raise ConfigError(f"{{0}}: unknown section {section!r} (timm takes m, n, p, mstd, mmax, inc"
                                  f"{'; w was removed in timm 1.0' if key == 'w' else ''})", where)
        except ValueError as error:
            if isinstance(error, ConfigError):
                raise
            raise ConfigError(f"{{0}}: section {section!r} needs {'an int' if key in ('m', 'n', 'mmax') else 'a number'}"
                              f" after {key!r}", where) from None
    return fields
