"""``torch.utils.data.DataLoader``'s keywords, honoured, mapped onto loader config fields, or refused.

Both loaders pass their keywords through ``dataloader_fields`` so that a
training script written for DataLoader runs after swapping one line, and
nothing it asks for is silently ignored: a keyword dataio cannot honour is
refused with one line (a ``ConfigError`` naming it) that says what to use
instead. Why refused: dataio decodes in threads of the training process and
collates into preallocated batches itself, so there are no worker processes
to set up and no per-sample collate or batch sampler to call.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import torch
from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler, SubsetRandomSampler,
                              WeightedRandomSampler)

from dataio.formats.errors import ConfigError
from dataio.loader.rebuilt_on_unpickle import record_arguments
from dataio.pipeline.device_check import parsed_device

# DataLoader's keywords besides ``dataset`` (torch 2.x), in its order
DATALOADER_KEYWORDS = ("batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
                       "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context",
                       "generator", "prefetch_factor", "persistent_workers", "pin_memory_device", "in_order")

NO_PROCESSES = "dataio decodes in threads of this process, there are no worker processes"
REFUSED = {  # keyword -> why, and what to use instead (when not None / its default)
    "batch_sampler": "dataio forms batches from its own seeded shard order: use batch_size= and drop_last= "
                     "(TextLoader: mode='bucket' or 'budget' for length-grouped batches)",
    "collate_fn": "dataio collates into preallocated batches itself: pass per-batch work as batch_transform= "
                  "(run on the device after the copy) and, for images, per-sample work as transform= (run on "
                  "the decode threads)",
    "worker_init_fn": f"{NO_PROCESSES} to initialise: do the set-up before building the loader",
    "multiprocessing_context": f"{NO_PROCESSES} to start: leave it out",
}


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a loader can honour beyond its config fields."""

    name: str  # "ImageLoader" or "TextLoader", for messages
    threads: bool  # decodes on worker threads: num_workers, prefetch_factor and timeout apply
    reads_indices: bool = True  # reads any sampler's own indices (``given_order``); TextLoader deals whole batches


def dataloader_fields(options: dict[str, Any], fields: Collection[str], can: Capabilities,
                      defaults: Any) -> tuple[dict[str, Any], Any]:
    """Config fields for ``options`` (DataLoader keywords mixed with config fields), and a sampler to follow.

    ``fields`` names the config's fields and ``defaults`` is the config the
    options replace values of. The returned sampler is the one passed as
    ``sampler=`` whose indices the loader reads (``can.reads_indices``:
    ``dataio.sampling.given_order``), or a ``DistributedSampler`` whose world
    and ``set_epoch`` it follows (TextLoader). Raises ``ConfigError`` naming the
    first keyword that cannot be honoured.
    """
    unknown = [k for k in options if k not in fields and k not in DATALOADER_KEYWORDS]
    if unknown:
        raise ConfigError(f"{can.name} got an unknown keyword {{0}}{did_you_mean(unknown[0], [*fields, *DATALOADER_KEYWORDS])}",
                          unknown[0])
    out = {k: v for k, v in options.items() if k in fields}
    given = dict(options)
    for name, why in REFUSED.items():
        if given.get(name) is not None:
            raise ConfigError(f"{{0}} is not supported: {why}", name)
    if "batch_size" in given and given["batch_size"] is None:
        raise ConfigError("{0}=None (no batching) is not supported: dataio yields batches; use batch_size=1", "batch_size")
    _workers(given, out, can)
    seeds: dict[str, int] = {}
    if "seed" in given:
        seeds["seed"] = int(given["seed"])
    follow = _sampler(given, out, seeds, fields, can)
    generator = given.get("generator")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise ConfigError(f"{{0}} must be a torch.Generator, got {type(generator).__name__}", "generator")
        seeds["generator"] = generator.initial_seed()
    if len(set(seeds.values())) > 1:
        names = ", ".join(f"{k} {v}" for k, v in seeds.items())
        raise ConfigError(f"{{0}}: the seeds disagree ({names}); dataio draws order and augmentation from one seed",
                          "seed")
    if seeds:
        out["seed"] = next(iter(seeds.values()))
    _device_keywords(given, defaults)
    return out, follow


def did_you_mean(name: str, valid: Collection[str]) -> str:
    """``"; did you mean 'image_size'?"`` for the closest valid name, or "" when none is close."""
    close = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _workers(given: dict[str, Any], out: dict[str, Any], can: Capabilities) -> None:
    """num_workers, prefetch_factor, timeout, persistent_workers, in_order."""
    workers = given.get("num_workers")
    auto = workers == "auto" and can.threads  # decode threads tuned by measurement (dataio.pipeline.thread_tuner)
    if workers is not None and not auto and (isinstance(workers, bool) or not isinstance(workers, int)
                                             or workers < 0):
        raise ConfigError(f"{{0}} must be an integer >= 0{' or auto' if can.threads else ''}, got {workers!r}",
                          "num_workers")
    if not can.threads:
        why = (f"{can.name} reads memory-mapped token shards in the calling thread, with no workers or "
               "batches in flight")
        if workers:
            raise ConfigError(f"{{0}}={workers} is not supported: {why}; leave it out or pass 0", "num_workers")
        if given.get("prefetch_factor") is not None:
            raise ConfigError(f"{{0}} is not supported: {why}; leave it out", "prefetch_factor")
        if given.get("timeout", 0):
            raise ConfigError(f"{{0}} is not supported: {why}, so nothing to wait for; leave it out", "timeout")
        out.pop("num_workers", None)
    else:
        factor = given.get("prefetch_factor")
        if factor is not None:
            if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
                raise ConfigError(f"{{0}} must be an integer >= 1, got {factor!r}", "prefetch_factor")
            if "prefetch_batches" in given and given["prefetch_batches"] != factor:
                raise ConfigError("{0} and {1} both set the batches in flight per thread; give one",
                                  "prefetch_factor", "prefetch_batches")
            out["prefetch_batches"] = factor  # the same unit: batches in flight per worker
        timeout = given.get("timeout", 0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
            raise ConfigError(f"{{0}} must be a number of seconds >= 0, got {timeout!r}", "timeout")
        if timeout and workers == 0:
            raise ConfigError("{0} needs num_workers >= 1: with 0 the calling thread decodes, nothing to wait for",
                              "timeout")
    for name in ("persistent_workers", "in_order"):  # threads persist; batches always come in order
        if name in given and not isinstance(given[name], bool):
            raise ConfigError(f"{{0}} must be True or False, got {given[name]!r}", name)


def _sampler(given: dict[str, Any], out: dict[str, Any], seeds: dict[str, int],
             fields: Collection[str], can: Capabilities) -> Any:
    """Shuffle, seed, world and drop_last (ImageLoader: drop_tail) from a torch sampler; the sampler to follow."""
    sampler = given.get("sampler")
    if sampler is None:
        return None
    if given.get("shuffle"):
        raise ConfigError("{0} is mutually exclusive with shuffle=True (as in DataLoader): the sampler decides",
                          "sampler")
    if given.get("shard") is False and dealt_by_rank(sampler):
        raise ConfigError("{0}=False reads the whole set on this rank; it excludes a sampler that deals "
                          "ranks their shares (leave one out)", "shard")
    if can.reads_indices and not _plain_order(sampler):  # read as torch reads it: its indices, its order
        dealt = dealt_by_rank(sampler)
        for name, value in (("world_size", getattr(sampler, "num_replicas", None)),
                            ("rank", getattr(sampler, "rank", None)), ("shard", None)):
            if given.get(name) is not None and not (dealt and given[name] == value):
                raise ConfigError(f"{{0}}={given[name]} is not used with sampler={type(sampler).__name__}: the "
                                  "loader reads the indices the sampler yields on this rank (leave one out)", name)
        out["shuffle"] = sampler_shuffles(sampler)  # the default transforms: training ones when it shuffles
        if dealt:
            seeds["sampler"] = int(getattr(sampler, "seed", 0))
        return sampler
    if dealt_by_rank(sampler):
        for name, value in (("world_size", sampler.num_replicas), ("rank", sampler.rank)):
            if given.get(name) is not None and given[name] != value:
                raise ConfigError(f"{{0}}={given[name]} disagrees with the DistributedSampler's {value}", name)
            out[name] = value
        out["shuffle"] = bool(getattr(sampler, "shuffle", False))
        if unpadded(sampler):  # Lightning's UnrepeatedDistributedSampler(Wrapper): each sample once, uneven counts
            out["even_batches"] = False
        if "drop_tail" in fields:  # the sampler's drop_last trims the uneven tail, DataLoader's the short batch
            drop = bool(getattr(sampler, "drop_last", False))
            if given.get("drop_tail") is not None and given["drop_tail"] != drop:
                raise ConfigError(f"{{0}}={given['drop_tail']} disagrees with the DistributedSampler's "
                                  f"drop_last={drop}", "drop_tail")
            out["drop_tail"] = drop
        else:  # TextLoader deals whole batches: either drop_last drops those that do not divide among the ranks
            out["drop_last"] = bool(given.get("drop_last")) or bool(getattr(sampler, "drop_last", False))
        seeds["sampler"] = int(getattr(sampler, "seed", 0))
        return sampler
    if isinstance(sampler, RandomSampler) and not sampler.replacement and sampler._num_samples is None:
        out["shuffle"] = True
        if sampler.generator is not None:
            seeds["sampler"] = sampler.generator.initial_seed()
        return None
    if isinstance(sampler, SequentialSampler):
        out["shuffle"] = False
        return None
    raise ConfigError(f"{{0}}={type(sampler).__name__} is not supported: dataio reads its shards in its own seeded "
                      "order; use shuffle=, seed= and world_size=/rank= (or a DistributedSampler), and select "
                      "samples when converting", "sampler")


def _plain_order(sampler: Any) -> bool:
    """A torch sampler that only says shuffle or not (read as dataio's own seeded order, the same on resume)."""
    return isinstance(sampler, SequentialSampler) or (
        isinstance(sampler, RandomSampler) and not sampler.replacement and sampler._num_samples is None)


def dealt_by_rank(sampler: Any) -> bool:
    """Whether ``sampler`` deals ranks their shares: a ``DistributedSampler``, or any sampler that says its
    ``num_replicas`` and ``rank`` (as torch's DataLoader, dataio reads shares only when a sampler asks)."""
    if isinstance(sampler, DistributedSampler):
        return True
    replicas, rank = getattr(sampler, "num_replicas", None), getattr(sampler, "rank", None)
    return isinstance(replicas, int) and isinstance(rank, int) and not isinstance(replicas, bool)


def unpadded(sampler: Any) -> bool:
    """Whether a rank-dealing sampler leaves the uneven tail unpadded (Lightning's ``UnrepeatedDistributedSampler``
    deals each index once: its ``total_size`` is the set's size, while a padding sampler's is a multiple of the
    ranks; judged on the total, the same on every rank, never on this rank's ``num_samples``)."""
    total = getattr(sampler, "total_size", None)
    if not isinstance(total, int) or getattr(sampler, "drop_last", False):
        return False
    return total % sampler.num_replicas != 0


def _device_keywords(given: dict[str, Any], defaults: Any) -> None:
    """pin_memory_device: dataio pins for its ``device``; another device is refused."""
    target = given.get("pin_memory_device") or ""
    if not target:
        return
    device = parsed_device(given.get("device", defaults.device))  # whether it is here: the config checks
    if parsed_device(target, "pin_memory_device").type != device.type:
        raise ConfigError(f"{{0}}={target!r} is not supported: dataio pins host memory for its device= "
                          f"({device}); pass device={target!r} instead", "pin_memory_device")


def check_sampler_size(sampler: Any, num_samples: int, where: str) -> None:
    """Refuse a sampler built over a data set of another size than the shards in ``where``."""
    source = getattr(sampler, "dataset", None) if dealt_by_rank(sampler) else \
        getattr(sampler, "data_source", None)
    if type(source).__name__ == "_DatasetSamplerWrapper":  # Lightning's DistributedSamplerWrapper deals the draws
        check_sampler_size(getattr(source, "_sampler", None), num_samples, where)  # of the sampler it wraps
        return
    try:
        size = len(source)  # type: ignore[arg-type]
    except TypeError:
        return
    if size != num_samples:
        raise ConfigError(f"{{0}} was built over {size} samples, but {where} holds {num_samples}", "sampler")


def sampler_shuffles(sampler: Any) -> bool:
    """Whether ``sampler`` (DataLoader's ``sampler=``) draws a shuffled order: a training loader's."""
    if dealt_by_rank(sampler):
        return bool(getattr(sampler, "shuffle", False))
    return isinstance(sampler, (RandomSampler, WeightedRandomSampler, SubsetRandomSampler))


P = ParamSpec("P")
R = TypeVar("R")
# DataLoader's keywords that are not config fields, with torch's defaults (the loaders list them in their signatures)
EXTRA_DEFAULTS: dict[str, Any] = {"sampler": None, "batch_sampler": None, "collate_fn": None, "worker_init_fn": None,
                                  "multiprocessing_context": None, "generator": None, "prefetch_factor": None,
                                  "persistent_workers": None, "pin_memory_device": "", "in_order": None}


def keyword_checked(init: Callable[P, R]) -> Callable[P, R]:
    """A constructor whose unknown keyword is one ``ConfigError`` naming the closest valid one (Python 3.11's own
    TypeError names only the keyword); the signature is kept for editors and type checkers."""
    parameters = inspect.signature(init).parameters

    @functools.wraps(init)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        unknown = [name for name in kwargs if name not in parameters]
        if unknown:
            owner = type(args[0]).__name__ if args else init.__qualname__
            raise ConfigError(f"{owner} got an unknown keyword {{0}}{did_you_mean(unknown[0], list(parameters))}",
                              unknown[0])
        done = init(*args, **kwargs)
        if args:  # a loader pickles as these arguments (``rebuilt_on_unpickle``)
            record_arguments(args[0], checked, args[1:], kwargs)
        return done

    return checked


def given_options(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The keywords of a constructor's ``locals()`` that differ from their defaults: those the caller set.

    (A keyword passed with its default value leaves a ``config=``'s value as it is.)
    """
    return {name: value for name, value in values.items()
            if name in defaults and not (value is defaults[name] or _equal(value, defaults[name]))}


def _equal(value: Any, default: Any) -> bool:
    try:
        return type(value) is type(default) and bool(value == default)
    except (TypeError, ValueError, RuntimeError):  # tensors and the like: only identity counts
        return False


def constructor_defaults(config_type: Any) -> dict[str, Any]:
    """Every keyword a loader constructor takes and its default: its config's fields, then DataLoader's others."""
    return {**{f.name: f.default for f in dataclasses.fields(config_type)}, **EXTRA_DEFAULTS}
