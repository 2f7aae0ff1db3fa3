"""dataio's exception names (defined in ``dataio.formats.errors``) and the readers' error policy, in one place."""

from __future__ import annotations

from dataio.formats.errors import (ConfigError, DataioError, LoaderClosed, NotPicklable, PassInProgress, SampleError,
                                   ShardError, TooManyErrors, UsageError, WorkerDied)
from dataio.pipeline.error_policy import DATA_EXCEPTIONS, ErrorPolicy, ErrorStats

__all__ = ["DATA_EXCEPTIONS", "ConfigError", "DataioError", "ErrorPolicy", "ErrorStats", "LoaderClosed",
           "NotPicklable", "PassInProgress", "SampleError", "ShardError", "TooManyErrors", "UsageError", "WorkerDied"]
