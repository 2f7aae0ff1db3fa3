"""dataio's exceptions and the readers' error policy.

Every error about data names where it came from: the file, shard and sample
key, and the reason. Only *data* errors are caught by the error policy; bugs
(TypeError, AttributeError, ...) always propagate.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

log = logging.getLogger("dataio")


class DataioError(Exception):
    """Base class of every error dataio raises on purpose."""


class UsageError(DataioError):
    """A bad invocation or configuration (the CLI exits 2 on these)."""


class ShardError(DataioError):
    """A shard is missing, truncated or does not match its manifest."""

    def __init__(self, shard: str, reason: str) -> None:
        super().__init__(f"shard {shard}: {reason}")
        self.shard, self.reason = shard, reason


class SampleError(DataioError):
    """One sample could not be read or decoded."""

    def __init__(self, shard: str, key: str, reason: str) -> None:
        super().__init__(f"sample {key!r} in shard {shard}: {reason}")
        self.shard, self.key, self.reason = shard, key, reason


class WorkerDied(DataioError):
    """A worker process was killed or crashed; raised in the main process instead of hanging."""


class TooManyErrors(DataioError):
    """The skip policy's error limit was exceeded: the data is mostly broken."""


# Exceptions that mean "this sample's bytes are bad", as raised by PIL,
# the tar reader and numpy; anything else is a bug and is not caught.
DATA_EXCEPTIONS: tuple[type[BaseException], ...] = (OSError, ValueError, SyntaxError, EOFError)


class ErrorPolicy(str, enum.Enum):
    """What a reader does with a bad sample."""

    RAISE = "raise"  # stop with a SampleError naming shard and key
    SKIP = "skip"  # drop the sample, count it in the stats
    WARN = "warn"  # drop the sample, count it and log a warning


@dataclass
class ErrorStats:
    """Counts and names the samples a reader dropped (JSON-safe via ``as_dict``)."""

    max_errors: int | None = None
    samples_ok: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)

    def handle(self, policy: ErrorPolicy, error: SampleError) -> None:
        """Apply ``policy`` to ``error``: raise it, or record it and carry on."""
        if policy is ErrorPolicy.RAISE:
            raise error
        self.errors.append({"shard": error.shard, "key": error.key, "reason": error.reason})
        if policy is ErrorPolicy.WARN:
            log.warning("skipped %s", error)
        if self.max_errors is not None and len(self.errors) > self.max_errors:
            raise TooManyErrors(
                f"{len(self.errors)} bad samples (max_errors={self.max_errors}); last: {error}"
            ) from error

    def as_dict(self) -> dict[str, object]:
        return {"samples_ok": self.samples_ok, "num_errors": len(self.errors), "errors": list(self.errors)}
