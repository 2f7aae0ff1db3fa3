"""dataio's exceptions: the lowest layer, so that packers, readers and the CLI share them.

Every error about data names where it came from: the file, shard and sample
key, and the reason. ``dataio.errors`` re-exports these names beside the
readers' error policy.

Every class can be built from its message alone and pickles with its type and
fields: torch's DataLoader re-raises a worker's exception as
``type(e)(message)`` (``torch._utils.ExceptionWrapper.reraise``) and turns it
into a ``RuntimeError`` when that call fails, which ``except DataioError``
would not catch. Built from a message, the fields are read back from the
error's own line at the end of it (the worker's traceback), else None.
"""

from __future__ import annotations

import ast
import re


def _rebuilt(cls: type, args: tuple) -> BaseException:
    """An exception of ``cls`` with ``args``, without calling its ``__init__`` (whose arguments differ)."""
    return cls.__new__(cls, *args)


def _own_line(error: BaseException, message: str, pattern: str) -> re.Match | None:
    """``pattern`` matched on the last line ``[module.]ClassName: ...`` of ``message`` (a worker's traceback, as
    torch passes it), or on ``message`` itself."""
    lines = re.findall(rf"^(?:[\w.]+\.)?{type(error).__name__}: (.*)$", message, re.MULTILINE)
    return re.fullmatch(pattern, lines[-1] if lines else message)


_QUOTED = r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""  # a str's repr, as SampleError writes the key


class DataioError(Exception):
    """Base class of every error dataio raises on purpose."""

    def __reduce__(self) -> tuple:
        """Pickled as its type, its args and its fields (``__dict__``), whatever its ``__init__`` takes."""
        return _rebuilt, (type(self), self.args), self.__dict__ or None


class UsageError(DataioError):
    """A bad invocation or configuration (the CLI exits 2 on these)."""


class LoaderClosed(UsageError, ValueError):
    """A loader used after ``close()`` (a ValueError, as Python's "I/O operation on closed file")."""


class PassInProgress(UsageError, RuntimeError):
    """A second pass started over a loader while its first is still being iterated."""


class NotPicklable(UsageError, TypeError):
    """A loader pickled with a transform or hook that does not pickle (a TypeError, as the pickler's own)."""


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

    shard: str | None  # None only when built from a message that is not its own (torch's re-raise of another)
    reason: str | None

    def __init__(self, shard: str, reason: str | None = None) -> None:
        if reason is None:  # one message (torch's re-raise): the fields from its line
            found = _own_line(self, shard, r"shard (.*?): (.*)")
            super().__init__(shard)
            self.shard, self.reason = found.groups() if found else (None, None)
            return
        super().__init__(f"shard {shard}: {reason}")
        self.shard, self.reason = shard, reason


class SampleError(DataioError):
    """One sample could not be read or decoded."""

    shard: str | None  # None only when built from a message that is not its own
    key: str | None
    reason: str | None

    def __init__(self, shard: str, key: str | None = None, reason: str | None = None) -> None:
        if key is None and reason is None:  # one message (torch's re-raise): the fields from its line
            found = _own_line(self, shard, rf"sample {_QUOTED} in shard (.*?): (.*)")
            super().__init__(shard)
            self.shard, self.key, self.reason = ((found[2], ast.literal_eval(found[1]), found[3]) if found
                                                 else (None, None, None))
            return
        super().__init__(f"sample {key!r} in shard {shard}: {reason}")
        self.shard, self.key, self.reason = shard, key, reason


class WorkerDied(DataioError):
    """A worker process was killed or crashed; raised in the main process instead of hanging."""


class TooManyErrors(DataioError):
    """The skip policy's error limit was exceeded: the data is mostly broken."""


class OutputError(DataioError):
    """Output could not be written (disk full, quota, I/O error, read-only file system), naming the path."""

    path: object
    errno: int | None  # None when built from a message (torch's re-raise)

    def __init__(self, path: object, error: OSError | None = None) -> None:
        if error is None:  # one message (torch's re-raise): the path from its line
            found = _own_line(self, str(path), r"cannot write (.*): .*")
            super().__init__(path)
            self.path, self.errno = found[1] if found else None, None
            return
        reason = error.strerror or type(error).__name__
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.errno = path, error.errno


class CheckpointError(DataioError):
    """A training checkpoint that cannot be read or does not fit the run (truncated, corrupted, another model)."""


class NothingConverted(DataioError):
    """A conversion produced no sample at all: every input was rejected, or there was none."""
