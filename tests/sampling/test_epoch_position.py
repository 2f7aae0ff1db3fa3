"""EpochPosition: the JSON-safe resumable state both loaders share."""

from __future__ import annotations

import json

import pytest

from dataio.sampling.epoch_position import EpochPosition


def test_counts_global_positions_and_round_trips_through_json():
    position = EpochPosition(seed=3, world_size=2)
    assert position.begin(100) == 0
    position.advance(8)
    position.advance(8)
    state = json.loads(json.dumps(position.state_dict()))
    assert state == {"epoch": 0, "samples_consumed": 32, "seed": 3, "world_size": 2}  # 2 ranks x 16
    resumed = EpochPosition(seed=3, world_size=4)  # another world size is fine
    resumed.load_state_dict(state)
    assert resumed.begin(100) == 32 and resumed.epoch == 0
    resumed.advance(17)  # the padded last batch: capped at the epoch's end
    assert resumed.state_dict()["samples_consumed"] == 100
    resumed.end()
    assert resumed.epoch == 1 and resumed.begin(100) == 0


def test_refuses_a_state_from_another_seed_or_past_the_epoch():
    position = EpochPosition(seed=3, world_size=2)
    with pytest.raises(ValueError, match="seed"):
        position.load_state_dict({"epoch": 0, "samples_consumed": 1, "seed": 4, "world_size": 2})
    with pytest.raises(ValueError, match="lacks"):
        position.load_state_dict({"epoch": 0, "batches_done": 1, "seed": 3})
    position.load_state_dict({"epoch": 0, "samples_consumed": 500, "seed": 3, "world_size": 2})
    with pytest.raises(ValueError, match="past the epoch"):
        position.begin(100)
