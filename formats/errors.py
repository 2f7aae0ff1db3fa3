"""dataio's exceptions: the lowest layer, so that packers, readers and the CLI share them.

Every error about data names where it came from: the file, shard and sample
key, and the reason. ``dataio.errors`` re-exports these names beside the
readers' error policy.
"""

from __future__ import annotations


class DataioError(Exception):
    """Base class of every error dataio raises on purpose."""


class UsageError(DataioError):
    """A bad invocation or configuration (the CLI exits 2 on these)."""


class LoaderClosed(UsageError, ValueError):
    """A loader used after ``close()`` (a ValueError, as Python's "I/O operation on closed file")."""


class PassInProgress(UsageError, RuntimeError):
    """A second pass started over a loader while its first is still being iterated."""


class ConfigError(UsageError, ValueError):
    """A bad option, naming its parameter; the CLI names the flag instead (``for_names``).

    ``template`` holds ``{0}``, ``{1}``, ... where ``parameters`` are named:
    ``ConfigError("{0} must be >= 2, got 1", "max_length")``.
    """

    def __init__(self, template: str, *parameters: str) -> None:
        self.template, self.parameters = template, parameters
        super().__init__(self.for_names({}))

    def for_names(self, names: dict[str, str]) -> str:
        """The message with each parameter replaced by ``names[parameter]`` where given.

        Plain replacement, not ``str.format``: the rest of the message holds
        paths, which may contain braces.
        """
        message = self.template
        for i, parameter in enumerate(self.parameters):
            message = message.replace(f"{{{i}}}", names.get(parameter, parameter))
        return message


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


class OutputError(DataioError):
    """Output could not be written (disk full, quota, I/O error, read-only file system), naming the path."""

    def __init__(self, path: object, error: OSError) -> None:
        reason = error.strerror or type(error).__name__
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.errno = path, error.errno


class CheckpointError(DataioError):
    """A training checkpoint that cannot be read or does not fit the run (truncated, corrupted, another model)."""


class NothingConverted(DataioError):
    """A conversion produced no sample at all: every input was rejected, or there was none."""
