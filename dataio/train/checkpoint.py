"""Training checkpoints: everything a resumed run needs, written atomically.

A checkpoint holds the model, optimizer, grad scaler and LR scheduler
states, the RNG states (torch CPU and CUDA, numpy, random), the train
loader's position, the step count and the chronometer. It is written to a
temporary file and renamed, so a kill never leaves a half-written one; the
previous checkpoint stays until the new one is complete. Loading uses
``torch.load(weights_only=True)``: nothing in it is unpickled as code.
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dataio.formats.errors import CheckpointError
from dataio.formats.files import atomic_writer, remove_stale_temps
from dataio.formats.file_gate import open_input

NAME = "checkpoint.pt"
_DAMAGED = ("invalid load key", "Unsupported operand", "PytorchStreamReader", "zip archive", "truncated", "unexpected EOF")  # torch's words


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "numpy": _numpy_state(), "python": _python_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), int(pos), int(has_gauss), float(gauss)))
    version, internal, gauss_next = state["python"]
    random.setstate((int(version), tuple(int(v) for v in internal.tolist()), gauss_next))


def _numpy_state() -> tuple:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss


def _python_state() -> tuple:
    version, internal, gauss_next = random.getstate()
    return version, torch.tensor(internal, dtype=torch.int64), gauss_next


def remove_leftovers(out: Path) -> list[Path]:
    """The temp checkpoints of writers killed mid-save (``.checkpoint.pt.tmp-HOST-PID``), removed; a live
    writer's are kept."""
    return remove_stale_temps(out / NAME)


def save(out: Path, state: dict[str, Any]) -> Path:
    """Write ``out/checkpoint.pt`` atomically (temp file, fsync, rename)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / NAME
    with atomic_writer(path) as f:
        torch.save(state, f)
    return path


def load(out: Path) -> dict[str, Any] | None:
    """The checkpoint in ``out``, or None when there is none; CheckpointError naming it if it cannot be read."""
    path = out / NAME
    if not path.is_file():
        return None
    try:
        with open_input(path) as f:  # the gate: a FIFO or device planted as the checkpoint is refused, unread
            if f.read(4) != b"PK\x03\x04":  # torch.save writes a zip archive
                raise CheckpointError(f"checkpoint {path} is corrupted (not a torch.save archive); restore a good "
                                      "copy, or move it away to start afresh")
            f.seek(0)
            return torch.load(f, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError,
            IndexError, OSError) as e:  # truncated, corrupted, or holding objects other than tensors
        raise CheckpointError(f"checkpoint {path} cannot be read ({reason(e)}); restore a good copy, or move it "
                              "away to start afresh") from None


def reason(error: BaseException) -> str:
    """A short, one-line reason from a loading error.

    torch's own messages run to paragraphs and advise ``weights_only=False``,
    which would run code from the file: that advice is never passed on.
    """
    full = str(error).strip()
    text = full.splitlines()[0] if full else ""
    if (isinstance(error, EOFError) or any(sign in full for sign in _DAMAGED)):
        return "truncated or corrupted"
    if "weights_only" in full or "Weights only" in full or isinstance(error, pickle.UnpicklingError):
        return "it holds objects other than tensors and plain values, which are refused, never unpickled as code"
    return f"corrupted ({type(error).__name__}: {text[:160]})" if text else f"corrupted ({type(error).__name__})"


def _weights_text(record: dict) -> str:
    """``web=0.5 code=0.5`` for constant weights, ``at 0: web=0.5 code=0.5, at 900: ...`` for a schedule."""
    def one(weights: list) -> str:
        return " ".join(f"{name}={weight:g}" for name, weight in zip(record["sources"], weights))  # not strict: a message

    points = record["points"]
    if len(points) == 1:
        return one(points[0][1])
    return ", ".join(f"at {position}: {one(weights)}" for position, weights in points) + f" {record['interpolation']}"


def mixture_mismatch(saved: dict | None, now: dict | None) -> str | None:
    """What differs between the mixture a checkpoint was written with and this run's (``TextTask.mixture_record``),
    or None when they agree. The breakpoints are compared in the loader's units, so a schedule in fractions of
    training moves with the epochs (and steps with the batch size and world size)."""
    if saved == now:
        return None
    if saved is None or now is None:
        which = "a mixture of " + ", ".join(now["sources"]) if now is not None else "one folder"
        was = "a mixture of " + ", ".join(saved["sources"]) if saved is not None else "one folder"
        return f"it was written by a run on {was}, this run trains on {which}"
    parts = []
    if saved["sources"] != now["sources"]:
        parts.append(f"the sources ({', '.join(saved['sources'])} then, {', '.join(now['sources'])} now)")
    if saved["unit"] != now["unit"]:
        parts.append(f"the blend's unit ({saved['unit']} then, {now['unit']} now: another batching mode)")
    if saved["points"] != now["points"] or saved["interpolation"] != now["interpolation"]:
        then = [p for p, _ in saved["points"]]
        positions = [p for p, _ in now["points"]]
        moved = f": breakpoints at {saved['unit']} {then} then, {positions} now" if then != positions else ""
        if then != positions and len(then) == len(positions):
            moved += " (fractions of training move with the epochs, steps with the batch size and world size)"
        if then == positions and saved["sources"] == now["sources"]:  # the same breakpoints: name the weights
            moved = f" ({_weights_text(saved)} then; {_weights_text(now)} now)"
        parts.append(f"the weights{moved}")
    if (saved["epoch_length"], saved["epoch_until"]) != (now["epoch_length"], now["epoch_until"]):
        parts.append(f"the epoch rule (epoch_length={saved['epoch_length']}, epoch_until={saved['epoch_until']} then; "
                     f"{now['epoch_length']}, {now['epoch_until']} now)")
    return "its mixture differs: " + "; ".join(parts or ["its description"])


def tokenizer_mismatch(saved: dict | None, now: dict | None) -> str | None:
    """How the tokenizer a checkpoint was written with (``Task.tokenizer_record``: file and sha256) differs from
    this run's, in one line, or None: the same ids would mean other words to the model it holds. A checkpoint
    that records none (written before, or by a run without one) is not compared."""
    if saved is None or now is None or saved.get("sha256") == now.get("sha256"):
        return None
    return (f"it was written with tokenizer {saved.get('file')} (sha256 {str(saved.get('sha256'))[:16]}), this run "
            f"tokenises with {now.get('file')} (sha256 {str(now.get('sha256'))[:16]}): the same ids would mean other "
            "words")
