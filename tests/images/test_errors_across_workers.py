"""dataio's exceptions across processes: torch's DataLoader workers re-raise them with their type (issue 33).

torch rebuilds a worker's exception as ``type(e)(message)`` (``torch._utils.ExceptionWrapper.reraise``) and
raised a ``RuntimeError`` instead when that failed, as it did for ``SampleError`` and ``ShardError`` (several
arguments): ``except dataio.errors.SampleError`` did not catch it.
"""

from __future__ import annotations

import pickle
import sys

import pytest
import torch
from torch._utils import ExceptionWrapper

import dataio
import dataio.errors
from dataio.formats.dataset.manifest import ManifestError
from dataio.formats.dataset.out_lock import OutputBusy
from dataio.formats.errors import (CheckpointError, ConfigError, DataioError, NothingConverted, OutputError,
                                   SampleError, ShardError)
from tests.test_reliability import flip_first_byte


def _every_class(base: type) -> list[type]:
    found = []
    for cls in base.__subclasses__():
        found += [cls, *_every_class(cls)]
    return found


EXAMPLES = [ShardError("shard-000003.tar", "truncated: 512 of 4096 bytes"),
            SampleError("s3://bucket/shard-000001.tar", "img'7", "ValueError: checksum mismatch"),
            OutputError("out/shard-000002.tar", OSError(28, "No space left on device")),
            ConfigError("{0} must be >= 2, got 1", "max_length"), CheckpointError("checkpoint x is corrupted"),
            OutputBusy("output folder out is being written"), ManifestError("no manifest"),
            NothingConverted("no image converted")]


def test_every_dataio_exception_is_rebuilt_from_its_message_and_pickled_with_its_fields():
    classes = {DataioError, *_every_class(DataioError)}
    assert {ShardError, SampleError, OutputError, ConfigError, OutputBusy, ManifestError} <= classes
    for cls in classes:
        rebuilt = cls("a message of one line")
        assert type(rebuilt) is cls and str(rebuilt) == "a message of one line"
        again = pickle.loads(pickle.dumps(rebuilt))
        assert type(again) is cls and str(again) == str(rebuilt) and again.__dict__ == rebuilt.__dict__
    for error in EXAMPLES:
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error) and again.__dict__ == error.__dict__
    assert pickle.loads(pickle.dumps(EXAMPLES[3])).for_names({"max_length": "--max-length"}).startswith(
        "--max-length must be")  # the parameter survives, so the CLI still names its flag


@pytest.mark.parametrize("error", EXAMPLES, ids=lambda e: type(e).__name__)
def test_torchs_worker_reraise_keeps_the_type_and_the_fields(error):
    try:
        raise error
    except DataioError:
        wrapper = ExceptionWrapper(sys.exc_info(), where="in DataLoader worker process 1")
    with pytest.raises(type(error)) as raised:
        wrapper.reraise()
    assert str(error) in str(raised.value) and "DataLoader worker process 1" in str(raised.value)
    for field in ("shard", "key", "reason", "path"):  # read back from the error's own line in the traceback
        if hasattr(error, field):
            assert getattr(raised.value, field) == getattr(error, field), field


def test_a_damaged_sample_under_a_dataloader_with_workers_is_a_sample_error(coloured_shards, tmp_path):
    broken, [(shard, key)] = flip_first_byte(coloured_shards, tmp_path, [11])
    loader = torch.utils.data.DataLoader(dataio.ShardDataset(broken, image_size=16), batch_size=4, num_workers=2)
    try:
        for _ in loader:
            pass
    except dataio.errors.SampleError as e:  # as a user's script catches it
        caught = e
    else:
        raise AssertionError("the damaged sample was read without an error")
    assert (caught.shard, caught.key) == (shard, key) and "checksum mismatch" in caught.reason
    assert "Caught SampleError in DataLoader worker process" in str(caught)
