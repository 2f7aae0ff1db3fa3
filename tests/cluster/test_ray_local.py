"""In-process Ray of the default suite (quick): two CPUs of its own, never a cluster named by RAY_ADDRESS."""

from __future__ import annotations

import os


def test_ray_local_runs_tasks_in_a_ray_of_its_own(ray_local):
    ray = ray_local

    @ray.remote(num_cpus=1)
    def square(value: int) -> int:
        return value * value

    assert ray.get([square.remote(n) for n in range(4)]) == [0, 1, 4, 9]
    assert ray.cluster_resources()["CPU"] == 2
    assert "RAY_ADDRESS" not in os.environ
    assert len(ray.nodes()) == 1
