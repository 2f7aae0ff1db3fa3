"""Whether a checkpoint that reads fine fits this run, and if not, what differs.

A checkpoint of another ``--model``, of data with another number of classes
(the head's shape) or another vocabulary, or of another ``--optimizer`` is a
sound file: calling it "corrupted" would invite deleting it. Checkpoints
record the run's model and optimizer names (``run_record``); older ones are
compared by their parameters' names and shapes, and their optimizer by its
hyper-parameters.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from dataio.train.config import TrainConfig

_SHOWN = 3  # parameters named in a message; the rest are counted


def run_record(config: TrainConfig, task: str) -> dict[str, str]:
    """What a checkpoint records of the run that wrote it, to name it when another run does not fit: ``task`` is the
    task chosen (``auto`` resolved), so a CLIP checkpoint resumed as classification names both tasks."""
    return {"model": config.model, "optimizer": config.optimizer, "task": task}


def _saved_task(run: dict[str, Any], saved: dict[str, Any]) -> str | None:
    """The task a checkpoint was written by: recorded, or for one written before it recorded the chosen task
    (``auto``, or nothing), clip when its model holds CLIP's temperature (``logit_scale``); None when unknown."""
    task = run.get("task")
    if isinstance(task, str) and task != "auto":
        return task
    return "clip" if "logit_scale" in saved else None


def _names(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def _optimizer_of(state: Any) -> str | None:
    """sgd or adamw from a saved optimizer state's hyper-parameters (checkpoints written before ``run``)."""
    try:
        keys = set(state["param_groups"][0])
    except (KeyError, IndexError, TypeError):
        return None
    return "adamw" if "betas" in keys else "sgd" if "momentum" in keys else None


def _model_misfit(saved: dict[str, Any], was: str | None, model: nn.Module, name: str) -> str | None:
    """The parameters that differ in name or shape between ``saved`` (a state dict) and ``model``, or None."""
    theirs = {k: tuple(v.shape) for k, v in saved.items() if isinstance(v, torch.Tensor)}
    ours = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    whose = f"model {was}" if was else "a model"  # checkpoints before run_record do not name it
    extra, missing = [k for k in theirs if k not in ours], [k for k in ours if k not in theirs]
    if extra or missing:
        parts = ([f"{len(extra)} of its parameters are not in this run's {name} ({_names(extra)})"] if extra
                 else []) + ([f"{len(missing)} of {name}'s are not in it ({_names(missing)})"] if missing else [])
        return f"is for {whose if was else 'another model'}: " + "; ".join(parts)
    differ = [k for k in ours if theirs[k] != ours[k]]
    if not differ:
        return None
    shown = differ[:_SHOWN]
    more = f" (and {len(differ) - _SHOWN} more parameters)" if len(differ) > _SHOWN else ""
    return (f"is for {whose} with " + ", ".join(f"{k} {theirs[k]}" for k in shown)
            + f"; this run builds {name} with " + ", ".join(str(ours[k]) for k in shown) + more)


def misfit(state: Any, model: nn.Module, config: TrainConfig, task: str) -> str | None:
    """How a loaded checkpoint ``state`` does not fit this run (its task ``task``, model and optimizer), to follow
    ``checkpoint PATH``; None when they fit, or when it is no trainer checkpoint at all (the caller says so). Another
    task is named first, both tasks in one line: its parameters' names would only list the towers' differences."""
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        return None
    run: dict[str, Any] = state["run"] if isinstance(state.get("run"), dict) else {}
    saved = _saved_task(run, state["model"])
    if saved is not None and saved != task:
        return f"is for --task {saved}; this run is --task {task}"
    if saved is None and task in ("segment", "clip"):  # never auto before (segment), or without CLIP's temperature
        return f"is for a task other than {task}; this run is --task {task}"
    was = run.get("model")
    if was is not None and was != config.model:
        return f"is for model {was}; this run builds {config.model}"
    found = _model_misfit(state["model"], was, model, config.model)
    if found:
        return found
    optimizer = run.get("optimizer") or _optimizer_of(state.get("optimizer"))
    if optimizer is not None and optimizer != config.optimizer:
        return f"is for optimizer {optimizer}; this run uses {config.optimizer}"
    return None


def unfit_reason(error: BaseException) -> str:
    """A short, one-line reason from an error raised while restoring a checkpoint that was read fine."""
    text = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
