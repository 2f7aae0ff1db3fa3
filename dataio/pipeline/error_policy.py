"""The readers' error policy: what a loader does with a bad sample (raise, skip and count, warn).

Only *data* errors are caught by the policy; bugs (TypeError,
AttributeError, ...) always propagate.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

from dataio.formats.errors import SampleError, TooManyErrors

log = logging.getLogger("dataio")

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
