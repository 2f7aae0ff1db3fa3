"""The shared device copy: one staging buffer per batch, views with each array's dtype and shape."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dataio.pipeline.device_copy import DeviceCopy, copy_arrays


def test_copy_arrays_round_trips_every_dtype_and_shape():
    arrays = {"ids": np.arange(15, dtype=np.int64).reshape(3, 5), "mask": np.array([True, False, True]),
              "cu": np.array([0, 3, 7], dtype=np.int32), "max": np.array(4), "odd": np.arange(3, dtype=np.uint8)}
    out = copy_arrays(arrays, torch.device("cpu"), pin=False)
    assert list(out) == list(arrays)
    for name, array in arrays.items():
        assert out[name].dtype == torch.from_numpy(array).dtype and tuple(out[name].shape) == array.shape
        assert np.array_equal(out[name].numpy(), array), name
    # all views of one buffer: one allocation and one copy per batch
    assert len({t.untyped_storage().data_ptr() for t in out.values()}) == 1


def test_on_the_cpu_the_copy_is_the_batch_itself():
    copy = DeviceCopy("cpu")
    assert copy.stream is None
    batches = [1, 2, 3]
    assert list(copy(batches, lambda b: b * 10)) == [(10, 1), (20, 2), (30, 3)]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_copies_one_batch_ahead_on_a_side_stream():
    arrays = {"ids": np.arange(12, dtype=np.int64).reshape(3, 4), "flag": np.array([True, False, True])}
    copy = DeviceCopy("cuda")
    moved = [m for m, _ in copy([arrays, arrays], lambda b: copy_arrays(b, copy.device, pin=True))]
    assert all(m["ids"].is_cuda and torch.equal(m["ids"].cpu(), torch.from_numpy(arrays["ids"])) for m in moved)
