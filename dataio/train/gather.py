"""All-gather of each rank's rows when ranks hold different numbers of them, with or without gradients.

``dist.all_gather`` needs one shape on every rank, and a rank's last batch, or its batch once padding
repeats are dropped, can be shorter than another's. So the row counts are gathered first (one small
collective), every rank pads its block to the largest, and the padding is cut off again after the
gather. ``with_grad`` gathers through torch's functional ``all_gather_single_autograd`` (named
``all_gather_tensor_autograd`` before torch 2.13, which warns that name is deprecated), whose backward
(a reduce-scatter) sums each block's gradient over the ranks and hands it back to the rank that owns the
block: the gradient of a loss over everyone's rows reaches every rank's own rows (open_clip's
``gather_with_grad``). ``torch.distributed.nn.functional.all_gather`` does the same, but torch 2.13 warns
on every call that it is deprecated (a FutureWarning on every rank's stderr at the first step).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed import _functional_collectives as functional_collectives
from torch.nn import functional as F

_GATHER_WITH_GRAD = (getattr(functional_collectives, "all_gather_single_autograd", None)
                     or functional_collectives.all_gather_tensor_autograd)


def distributed() -> bool:
    """Whether a process group of more than one rank is running."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def row_counts(rows: int, device: torch.device) -> list[int]:
    """Every rank's row count, in rank order."""
    mine = torch.tensor([rows], dtype=torch.int64, device=device)
    counts = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(counts, mine)
    return [int(c) for c in counts]


def gather_rows(tensor: torch.Tensor, *, with_grad: bool = False,
                keep_own: bool = False) -> tuple[torch.Tensor, list[int]]:
    """Every rank's ``tensor`` rows concatenated in rank order, and each rank's row count.

    ``with_grad``: gradients flow back to every rank's rows (see the module docstring). ``keep_own``
    (without ``with_grad``): this rank's own block is its ``tensor`` itself, so its gradient reaches this
    rank's rows only, from this rank's loss (open_clip without ``gather_with_grad``). Without a process group
    of several ranks: ``tensor`` itself.
    """
    if not distributed():
        return tensor, [len(tensor)]
    counts = row_counts(len(tensor), tensor.device)
    most = max(counts)
    padded = F.pad(tensor, (0, 0) * (tensor.dim() - 1) + (0, most - len(tensor))) if most > len(tensor) else tensor
    padded = padded.contiguous()
    if with_grad:
        gathered = _GATHER_WITH_GRAD(padded, 0, dist.group.WORLD)
        blocks = list(functional_collectives.wait_tensor(gathered).split(most))
    else:
        blocks = [torch.empty_like(padded) for _ in counts]
        dist.all_gather(blocks, padded.detach())
        if keep_own:
            blocks[dist.get_rank()] = padded
    return torch.cat([block[:count] for block, count in zip(blocks, counts, strict=True)]), counts
