"""EpochPosition: the JSON-safe resumable state both loaders share."""

from __future__ import annotations

import json

import pytest

from dataio.epoch_position import EpochPosition


def test_counts_batches_and_round_trips_through_json():
    position = EpochPosition(seed=3, world_size=2)
    assert position.begin() == 0
    position.advance()
    position.advance()
    state = json.loads(json.dumps(position.state_dict()))
    assert state == {"epoch": 0, "batches_done": 2, "seed": 3, "world_size": 2}
    resumed = EpochPosition(seed=3, world_size=2)
    resumed.load_state_dict(state)
    assert resumed.begin() == 2 and resumed.epoch == 0
    resumed.end()
    assert resumed.epoch == 1 and resumed.begin() == 0


def test_refuses_a_state_from_another_seed_or_world_size():
    position = EpochPosition(seed=3, world_size=2)
    with pytest.raises(ValueError, match="seed"):
        position.load_state_dict({"epoch": 0, "batches_done": 1, "seed": 4, "world_size": 2})
    with pytest.raises(ValueError, match="world size 4"):
        position.load_state_dict({"epoch": 0, "batches_done": 1, "seed": 3, "world_size": 4})
