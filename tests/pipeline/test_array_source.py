"""A test-only kind of sample (``array_source.py``, two arrays of different shapes per sample) through the loader
skeleton: DDP shares, exact and elastic mid-epoch resume, the error policy, threads, the device copy and
``batch_transform`` all come from the skeleton, none from the source."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from dataio.errors import ConfigError, SampleError
from dataio.loader.sample_loader import SampleLoader
from tests.pipeline.array_source import SHAPES, ArraySource, expected

COUNT = 43


def batches(loader: SampleLoader) -> list[dict[str, torch.Tensor]]:
    return list(loader)


def real(batch: dict[str, torch.Tensor]) -> list[int]:
    """The batch's sample ids, padding repeats left out."""
    return batch["sample_ids"][~batch["repeated"]].tolist()


def check_values(batch: dict[str, torch.Tensor]) -> None:
    """Every row holds the arrays of the sample its ``sample_ids`` names, with the field's shape and dtype."""
    for name, (shape, dtype) in SHAPES.items():
        assert batch[name].shape[1:] == shape and batch[name].dtype == torch.from_numpy(np.zeros(0, dtype)).dtype
    for row, sample in enumerate(batch["sample_ids"].tolist()):
        for name, value in expected(sample).items():
            assert np.array_equal(batch[name][row].numpy(), value), (name, sample)


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_ranks_read_every_sample_once_with_equal_batches(world_size):
    seen, steps = Counter(), set()
    for rank in range(world_size):
        loader = SampleLoader(ArraySource(COUNT), batch_size=5, seed=3, world_size=world_size, rank=rank)
        got = batches(loader)
        steps.add(len(got))
        for batch in got:
            check_values(batch)
            seen.update(batch["sample_ids"][~batch["repeated"]].tolist())
    assert len(steps) == 1 and seen == Counter(range(COUNT))


def test_epochs_are_deterministic_shuffled_and_the_same_whatever_the_threads():
    one = SampleLoader(ArraySource(COUNT), batch_size=6, seed=1)
    threaded = SampleLoader(ArraySource(COUNT), batch_size=6, seed=1, num_workers=2, prefetch_batches=2)
    first = [b["sample_ids"].tolist() for b in batches(one)]
    for a, b in zip(first, [b["sample_ids"].tolist() for b in batches(threaded)], strict=True):
        assert a == b
    assert sorted(i for b in first for i in b) != [i for b in first for i in b]  # shuffled
    assert [b["sample_ids"].tolist() for b in batches(one)] != first  # epoch 1's order is another


@pytest.mark.parametrize("before, after", [(1, 1), (2, 2), (2, 3), (3, 2)])
def test_a_mid_epoch_resume_reads_the_rest_exactly_on_any_world(before, after):
    full = [SampleLoader(ArraySource(COUNT), batch_size=4, seed=5, world_size=before, rank=r) for r in range(before)]
    iterators = [iter(loader) for loader in full]
    read = Counter(i for it in iterators for _ in range(3) for i in real(next(it)))
    state = full[0].state_dict()
    rest = []
    for rank in range(after):
        resumed = SampleLoader(ArraySource(COUNT), batch_size=4, seed=5, world_size=after, rank=rank)
        resumed.load_state_dict(state)
        rest.append([real(b) for b in batches(resumed)])
    if before == after:  # the same world: exactly the batches the uninterrupted run would have read
        for rank, it in enumerate(iterators):
            for a, b in zip([real(b) for b in it], rest[rank], strict=True):
                assert a == b
    remaining = Counter(i for batches_ in rest for batch in batches_ for i in batch)
    assert set(read) | set(remaining) == set(range(COUNT))  # every sample read, before or after the resume
    assert not set(read) & set(remaining) and sum(read.values()) + sum(remaining.values()) == COUNT  # each once


def test_the_error_policy_raises_naming_the_sample_or_skips_and_counts():
    with pytest.raises(SampleError, match="sample '7' in shard arrays-0: damaged"):
        batches(SampleLoader(ArraySource(COUNT, bad={7}), batch_size=8, shuffle=False))
    loader = SampleLoader(ArraySource(COUNT, bad={7, 8, 30}), batch_size=8, shuffle=False, on_error="skip")
    ids = [i for batch in batches(loader) for i in batch["sample_ids"].tolist()]
    assert ids == [i for i in range(COUNT) if i not in {7, 8, 30}]
    assert loader.stats.samples_ok == COUNT - 3 and [e["key"] for e in loader.stats.errors] == ["7", "8", "30"]


def test_batch_transform_runs_on_the_device_batch_and_its_rows_are_checked():
    def scale(batch: dict) -> dict:
        return {**batch, "vector": batch["vector"] * 2, "norm": batch["vector"].norm(dim=1)}

    for batch in SampleLoader(ArraySource(COUNT), batch_size=8, shuffle=False, batch_transform=scale):
        first = int(batch["sample_ids"][0])
        assert torch.allclose(batch["vector"][0], torch.from_numpy(expected(first)["vector"]) * 2)
        assert batch["norm"].shape == (len(batch["sample_ids"]),) and batch["grid"].device.type == "cpu"
    with pytest.raises(ConfigError, match="batch_transform returned vector with 7 rows for a batch of 8 samples"):
        batches(SampleLoader(ArraySource(COUNT), batch_size=8,
                             batch_transform=lambda b: {**b, "vector": b["vector"][1:]}))


def test_the_architecture_pages_example_source_runs_as_written():
    page = (Path(__file__).resolve().parents[2] / "docs" / "architecture.md").read_text()
    section = page[page.index("## Adding a kind of sample"):]
    code = section[section.index("```python") + len("```python"):section.index("```\n", section.index("```python"))]
    namespace: dict = {}
    exec(compile(code, "docs/architecture.md", "exec"), namespace)  # the page's own code, as a reader copies it
    loader = namespace["SampleLoader"](namespace["MySource"](10), batch_size=4, seed=0)
    batches_ = list(loader)
    assert sorted(i for b in batches_ for i in b["sample_ids"].tolist()) == list(range(10))
    for batch in batches_:
        assert torch.equal(batch["x"][:, 0], batch["sample_ids"].float())
