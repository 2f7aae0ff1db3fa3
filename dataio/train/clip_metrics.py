"""Retrieval recall of a CLIP model over a whole validation set: image->text and text->image, @1 and @5.

Every rank embeds its share of the set; the embeddings, token ids and sample ids are gathered
(``gather_rows``), padding repeats dropped (the loaders flag them ``repeated``), and each sample kept
once by its sample id, in sample-id order: the same set, in the same order, on any number of ranks.

A query's hit at k: a right answer among its k best-scored candidates. Right answers are by caption:
a sample's text is its caption's token ids, so two samples with the same caption (a caption
describing several pictures, e.g. "a red circle on a blue background") have the same right answers
both ways, and an image query ranks the distinct captions. Counting only the paired index would cap
recall at 1 / (number of copies), ties being broken at random. With all captions distinct this is
open_clip's ``get_clip_metrics`` (``R@k``: the paired index among the top k). Recall is per sample:
each sample's image and each sample's caption is one query.

Queries are split over the ranks (``rank::world``) and the hit counts summed by the caller, so each
rank scores ``1 / world`` of the queries, ``QUERY_CHUNK`` at a time against all candidates: memory
stays ``QUERY_CHUNK x N`` scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dataio.train.clip_loss import pair_loss
from dataio.train.gather import gather_rows

KS = (1, 5)
QUERY_CHUNK = 1024


@dataclass
class Embedded:
    """A validation set's embeddings and caption ids on this rank, padding repeats included until ``unique``."""

    images: torch.Tensor  # (N, D) float32, L2-normalised
    texts: torch.Tensor  # (N, D)
    input_ids: torch.Tensor  # (N, L) int64, padding set to -1
    sample_ids: torch.Tensor  # (N,) int64
    repeated: torch.Tensor  # (N,) bool

    @classmethod
    def concat(cls, parts: list[Embedded], dim: int, device: torch.device) -> Embedded:
        """The parts of several batches (no part: an empty set of width ``dim``), token ids padded to one length."""
        if not parts:
            empty = torch.zeros(0, dim, device=device)
            none = torch.zeros(0, dtype=torch.int64, device=device)
            return cls(empty, empty.clone(), none[:, None], none, none.bool())
        length = max(p.input_ids.shape[1] for p in parts)
        ids = [torch.nn.functional.pad(p.input_ids, (0, length - p.input_ids.shape[1]), value=-1) for p in parts]
        return cls(torch.cat([p.images for p in parts]), torch.cat([p.texts for p in parts]), torch.cat(ids),
                   torch.cat([p.sample_ids for p in parts]), torch.cat([p.repeated for p in parts]))

    def gathered(self) -> Embedded:
        """All ranks' rows (this one's alone without a process group), token ids padded to the longest."""
        length = torch.tensor([self.input_ids.shape[1]], device=self.input_ids.device)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(length, op=torch.distributed.ReduceOp.MAX)
        ids = torch.nn.functional.pad(self.input_ids, (0, int(length) - self.input_ids.shape[1]), value=-1)
        columns = [gather_rows(t)[0] for t in (self.images, self.texts, ids, self.sample_ids[:, None],
                                               self.repeated[:, None].to(torch.int64))]
        return Embedded(columns[0], columns[1], columns[2], columns[3][:, 0], columns[4][:, 0].bool())

    def unique(self) -> Embedded:
        """Each sample once, in sample-id order, padding repeats dropped."""
        keep = ~self.repeated
        rows = torch.nonzero(keep).flatten()[_first_of_each(self.sample_ids[keep])]
        return Embedded(self.images[rows], self.texts[rows], self.input_ids[rows], self.sample_ids[rows],
                        self.repeated[rows])


def caption_groups(input_ids: torch.Tensor) -> torch.Tensor:
    """``(N,)`` ids equal for rows with the same caption tokens (padding already set to -1)."""
    if len(input_ids) == 0:
        return torch.zeros(0, dtype=torch.int64, device=input_ids.device)
    return torch.unique(input_ids, dim=0, return_inverse=True)[1]


def recall_hits(images: torch.Tensor, texts: torch.Tensor, groups: torch.Tensor, *, rank: int = 0,
                world: int = 1, ks: tuple[int, ...] = KS) -> torch.Tensor:
    """float64 ``[i2t hits at each k, t2i hits at each k]`` over this rank's queries (``rank::world``).

    Image queries rank the distinct captions (one text per caption group): copies of one caption score the
    same, and would otherwise fill the top k with one answer.
    """
    hits = torch.zeros(2 * len(ks), dtype=torch.float64, device=images.device)
    queries = torch.arange(rank, len(images), world, device=images.device)
    captions = _first_of_each(groups)  # rows of the distinct captions, in group order
    sides = ((images, texts[captions], groups[captions]), (texts, images, groups))
    for direction, (query_side, candidates, candidate_groups) in enumerate(sides):
        most = min(max(ks), len(candidates))
        for chunk in queries.split(QUERY_CHUNK):
            best = (query_side[chunk] @ candidates.T).topk(most, dim=1).indices  # (chunk, most)
            right = candidate_groups[best] == groups[chunk][:, None]
            for i, k in enumerate(ks):
                hits[direction * len(ks) + i] += right[:, :k].any(dim=1).sum()
    return hits


def _first_of_each(groups: torch.Tensor) -> torch.Tensor:
    """The first row of each group."""
    order = torch.argsort(groups, stable=True)
    first = torch.ones(len(order), dtype=torch.bool, device=groups.device)
    first[1:] = groups[order][1:] != groups[order][:-1]
    return order[first]


def block_loss_sum(images: torch.Tensor, texts: torch.Tensor, logit_scale: torch.Tensor, block: int, *,
                   rank: int = 0, world: int = 1) -> torch.Tensor:
    """float64 ``[loss x rows, rows]`` of the contrastive loss over consecutive ``block``-row batches of the set
    (this rank's blocks: ``rank::world``): a training step's loss at that global batch size."""
    total = torch.zeros(2, dtype=torch.float64, device=images.device)
    for start in range(rank * block, len(images), world * block):
        rows = slice(start, start + block)
        count = len(images[rows])
        total += torch.stack([pair_loss(images[rows], texts[rows], logit_scale).double() * count,
                              torch.tensor(count, dtype=torch.float64, device=images.device)])
    return total


def recall_metrics(totals: list[float]) -> dict[str, float]:
    """``val_metrics``' names from summed totals ``[i2t@1, i2t@5, t2i@1, t2i@5, samples, loss x rows, rows]``."""
    i2t1, i2t5, t2i1, t2i5, count, loss, rows = totals
    n = max(count, 1)
    return {"i2t_r1": i2t1 / n, "i2t_r5": i2t5 / n, "t2i_r1": t2i1 / n, "t2i_r5": t2i5 / n,
            "loss": loss / max(rows, 1)}
