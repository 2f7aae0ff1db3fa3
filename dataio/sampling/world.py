"""The world a loader runs in: explicit arguments, else ``torch.distributed`` when initialised, else one rank."""

from __future__ import annotations


def check_rank_args(world_size: int | None, rank: int | None) -> None:
    """Validate explicit ``world_size`` / ``rank`` arguments (both or neither)."""
    if (world_size is None) != (rank is None):
        raise ValueError(f"give both world_size and rank, or neither (got world_size={world_size}, rank={rank})")
    if world_size is not None and rank is not None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")


def resolve_world(world_size: int | None, rank: int | None) -> tuple[int, int]:
    """``(world_size, rank)``: the explicit values, or the initialised process group's, or ``(1, 0)``."""
    check_rank_args(world_size, rank)
    if world_size is not None and rank is not None:
        return world_size, rank
    import torch.distributed as dist  # deliberately lazy: sampling is pure and imports no torch of its own

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0
