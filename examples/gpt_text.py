"""A GPT-style language model trained on ``dataio.TextLoader``: packed rows, token-budget batches, mid-epoch resume.

The corpus is tokenised once (``dataio convert text``) into memory-mapped Arrow shards; the
loader slices batches from them with no tokenisation, no worker processes and no padding waste:

- training packs documents end to end into ``--block-size`` rows (``mode="pack"``); each batch
  carries ``position_ids`` restarting at every document, from which the model builds a
  block-diagonal causal mask, so no token attends across a document boundary, and the labels
  at a boundary are masked (-100);
- validation reads whole documents in token-budget batches (``mode="budget"``): as many rows as
  fit ``--max-tokens`` once padded, similar lengths together, so the batch size varies and
  almost no compute goes to padding;
- every ``--checkpoint-every`` steps the model, the optimizer and ``loader.state_dict()`` (a
  few integers: epoch and position) are written atomically; ``--resume`` continues from them
  mid-epoch with exactly the batches an uninterrupted run would have read next, so on a CPU
  the final weights are bit-identical (the run prints their sha256). Under torchrun every rank
  reads its share of each epoch's batches (equal counts by construction) and the state
  resumes on another number of ranks too.

    dataio synth-text corpus.txt --documents 200000          # or your own .txt/.jsonl/.parquet
    dataio convert text corpus.txt tokens --train-tokenizer bpe --vocab-size 32000 --max-length 1024
    python examples/gpt_text.py tokens --out runs/gpt --epochs 4 --block-size 1024 --batch-size 32
    python examples/gpt_text.py tokens --out runs/gpt --epochs 4 --block-size 1024 --batch-size 32 --resume
    torchrun --nproc_per_node 8 examples/gpt_text.py tokens --out runs/gpt ...

A quick run: ``--steps 6 --block-size 128 --batch-size 4 --max-tokens 1024 --dim 32 --layers 1``
(``--stop-after 3`` stops there with a checkpoint, as a job's time limit would).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch import nn

import dataio


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(attended.transpose(1, 2).reshape(n, t, d))
        return x + self.mlp(self.norm2(x))


class GPT(nn.Module):
    """Pre-norm causal transformer, learned positions, tied embeddings."""

    def __init__(self, vocab_size: int, context: int, dim: int, layers: int, heads: int) -> None:
        super().__init__()
        self.embed, self.positions = nn.Embedding(vocab_size, dim), nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab_size, bias=False)
        self.head.weight = self.embed.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        document = (position_ids == 0).cumsum(1)  # a new document wherever the positions restart
        causal = torch.ones(t, t, dtype=torch.bool, device=input_ids.device).tril()
        mask = (causal & (document[:, :, None] == document[:, None, :]))[:, None]
        x = self.embed(input_ids) + self.positions(position_ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def positions_of(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Packed batches carry ``position_ids``; padded ones count from 0 in every row."""
    if "position_ids" in batch:
        return batch["position_ids"]
    n, t = batch["input_ids"].shape
    return torch.arange(t, device=batch["input_ids"].device).expand(n, t)


def lm_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the tokens that have a label (padding and document ends are -100)."""
    logits = model(batch["input_ids"], positions_of(batch))
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten(), ignore_index=-100)


def learning_rate(step: int, total: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then a cosine to a tenth of the peak at the last step: a pure function of the step."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def weights_sha256(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode() + tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def save(path: Path, state: dict) -> None:
    """Written next to ``path`` and renamed over it: a kill while writing leaves the previous checkpoint."""
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


@torch.no_grad()
def evaluate(model: nn.Module, loader: dataio.TextLoader, distributed: bool) -> tuple[float, int, int]:
    """Loss per token over the validation shards (token-budget batches); tokens and batches read here."""
    model.eval()
    device = next(model.parameters()).device
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # summed loss, tokens, batches
    for batch in loader:
        keep = ~batch["repeated"]  # rows a rank repeats so that ranks run equal steps: not counted twice
        labels = batch["labels"][keep]
        if len(labels):
            logits = model(batch["input_ids"][keep], positions_of(batch)[keep])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, reduction="sum")
            totals += torch.stack([loss.double(), (labels != -100).sum().double(), totals.new_tensor(1.0)])
    if distributed:
        dist.all_reduce(totals)
    model.train()
    return float(totals[0] / totals[1]), int(totals[1]), int(totals[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokens", type=Path, help="a `dataio convert text` output folder")
    parser.add_argument("--val", type=Path, help="validation tokens (default: none)")
    parser.add_argument("--out", type=Path, default=Path("runs/gpt"))
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=0, help="total optimizer steps (0: --epochs whole epochs)")
    parser.add_argument("--stop-after", type=int, default=0, help="stop after this many steps of this run, with a "
                                                                  "checkpoint (as a job's time limit would)")
    parser.add_argument("--mode", choices=["pack", "budget"], default="pack", help="training batches")
    parser.add_argument("--block-size", type=int, default=1024, help="pack: tokens per row")
    parser.add_argument("--batch-size", type=int, default=32, help="pack: rows per batch and rank")
    parser.add_argument("--max-tokens", type=int, default=32768, help="budget: padded tokens per batch and rank")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=100, help="warm-up steps (at most a tenth of the run)")
    parser.add_argument("--checkpoint-every", type=int, default=500)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    args = parser.parse_args()

    distributed = "RANK" in os.environ  # under torchrun
    if distributed:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank = dist.get_rank() if distributed else 0
    device = torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)

    batching = dict(mode="pack", block_size=args.block_size, batch_size=args.batch_size) if args.mode == "pack" \
        else dict(mode="budget", max_tokens=args.max_tokens)
    # built after init_process_group: each loader reads rank and world size from it
    loader = dataio.TextLoader(args.tokens, seed=args.seed, device=str(device), pin_memory=device.type == "cuda",
                               **batching)
    val = dataio.TextLoader(args.val, mode="budget", max_tokens=args.max_tokens, shuffle=False,
                            device=str(device)) if args.val else None
    tokenizer = Tokenizer.from_file(str(args.tokens / "tokenizer.json"))  # saved by the converter
    longest = json.loads((args.tokens / "manifest.json").read_text())["options"]["max_length"]
    model = GPT(tokenizer.get_vocab_size(), max(args.block_size, longest), args.dim, args.layers, args.heads)
    model.to(device)
    train_model = nn.parallel.DistributedDataParallel(model) if distributed else model
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95))

    total = args.steps or args.epochs * len(loader)
    warmup = min(args.warmup, max(1, total // 10))
    step, start_epoch = 0, 0
    checkpoint_path = args.out / "checkpoint.pt"
    if args.resume:
        checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=True)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])  # the epoch, and how far into it all ranks had read
        step, start_epoch = checkpoint["step"], checkpoint["loader"]["epoch"]
        if rank == 0:
            print(f"resumed at step {step}, epoch {start_epoch}, {checkpoint['loader']['samples_consumed']} rows "
                  "into it")
    args.out.mkdir(parents=True, exist_ok=True)

    def checkpoint() -> None:
        if rank == 0:  # the loader's state covers every rank's reads: one file is enough
            save(checkpoint_path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                                   "loader": loader.state_dict(), "step": step})

    steps_here, epoch = 0, start_epoch
    while step < total and steps_here != (args.stop_after or -1):
        loader.set_epoch(epoch)  # after a resume, the loaded epoch keeps its position
        for batch in loader:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, total, args.lr, warmup)
            loss = lm_loss(train_model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step, steps_here = step + 1, steps_here + 1
            if rank == 0 and (step % args.log_every == 0 or step == 1):
                tokens = int(batch["attention_mask"].sum())
                print(f"step {step}/{total} epoch {epoch} loss={loss.item():.6f} tokens={tokens} "
                      f"rows={len(batch['input_ids'])}x{batch['input_ids'].shape[1]}")
            if step % args.checkpoint_every == 0 or step == total or steps_here == args.stop_after:
                checkpoint()
            if step == total or steps_here == args.stop_after:
                break
        else:
            epoch += 1

    if rank == 0:
        print(f"{'stopped' if step < total else 'finished'} at step {step}: loss={loss.item():.6f} "
              f"weights sha256 {weights_sha256(model)}")
    if val is not None and step == total:
        val_loss, tokens, batches = evaluate(model, val, distributed)
        if rank == 0:
            print(f"val: loss={val_loss:.4f} ppl={math.exp(val_loss):.1f} over {tokens} tokens in {batches} "
                  f"token-budget batches")
            prompt = torch.tensor([tokenizer.encode("The").ids], device=device)
            with torch.no_grad():
                for _ in range(12):  # greedy: the model's favourite continuation
                    logits = model(prompt, torch.arange(prompt.shape[1], device=device)[None])
                    prompt = torch.cat([prompt, logits[:, -1].argmax(-1, keepdim=True)], 1)
            print(f"sample: {tokenizer.decode(prompt[0].tolist())!r}")
    loader.close()
    if val is not None:
        val.close()
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
