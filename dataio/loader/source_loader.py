"""``SourceLoader``: the skeleton every loader is a façade over: a sample source, its sampling, the pass driver.

What a kind of loader says: its source (what one batch of ids reads into named
host fields), this rank's batches in a pass (a ``PassPlan``, from the epoch's
order or plan), the move to the device, and what it yields. What every loader
does the same way lives here: the pass (position, stage timing, the one-pass
guard, Accelerate's ``GradientState``, the ranks' agreement at the first pass,
the world of a process group started later), the DataLoader surface (``len``,
``sampler``, ``batch_sampler``, ``drop_last``, ...), ``state_dict`` and
``load_state_dict`` (``ResumableLoader``), ``close``. ``docs/architecture.md``
draws it; ``tests/pipeline/array_source.py`` is a kind of sample in 100 lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from dataio.formats.errors import LoaderClosed, TooManyErrors
from dataio.formats.remote.storage import redact
from dataio.loader.accelerate_pass import AcceleratePass, watch_prepare
from dataio.loader.epoch_check import EpochDigesting
from dataio.loader.epoch_sampler import EpochBatchSampler, EpochSampler, SharedEpoch
from dataio.loader.rebuilt_on_unpickle import RebuiltOnUnpickle
from dataio.loader.share_request import Request, share_request, whole_set_line
from dataio.pipeline.device_copy import DeviceCopy
from dataio.pipeline.exit_close import close_at_exit
from dataio.pipeline.host_batch import HostBatch
from dataio.pipeline.loader_stats import LoaderStats
from dataio.pipeline.pass_driver import PassDriver
from dataio.pipeline.pass_plan import PassPlan
from dataio.pipeline.sample_source import SampleSource
from dataio.pipeline.threaded_batches import BatchTimeout
from dataio.sampling.epoch_position import EpochPosition, ResumableLoader
from dataio.sampling.rank_agreement import RankAgreement, construction_site
from dataio.sampling.world import resolve_world

log = logging.getLogger("dataio")
_INTERNALS = {"_pool": ("driver", "_pool"), "_gate": ("driver", "_gate"), "_dali": ("source", "dali"),
              "_buffers": ("source", "buffers"), "_transfer": ("_stage", "finish")}


class SourceLoader(EpochDigesting, RebuiltOnUnpickle, ResumableLoader):
    """A loader over ``source``: a façade's constructor calls ``_start``; ``_pass`` yields ``(moved, host)``; pickled,
    it is rebuilt from its constructor's arguments and position (``rebuilt_on_unpickle``)."""

    config: Any
    folder: Any  # what messages call the data set
    source: SampleSource
    driver: PassDriver
    stats: LoaderStats
    _copy: DeviceCopy
    # The key each batch is seeded with (augment.SeedKey: crops, augmentation, hooks), or None when a kind draws
    # nothing per batch (text): the base imports no augment, so a text loader never imports kornia.
    _key_type: Any = None
    _by_samples = False  # a batch's failures are its samples, dropped by the source (SampleSharing's kinds)
    _reads_sampler = False  # a sampler= is read as its indices (SampleSharing's kinds), not as a world to share
    _unpadded = False  # Lightning's predict asked for UnrepeatedDistributedSampler's shares (``share_request``)
    _whole_of = 0  # a drop-in reading the whole set in a process group of this many ranks (0: it reads a share)
    _said_whole = False  # the whole-set line was said
    _built_as = ""  # "dataio.DataLoader" when the drop-in built it: the name its notes give the constructor

    def _start(self, source: SampleSource, stats: LoaderStats, *, fingerprint: str, threads: int,
               prefetch: int = 1, timeout: float = 0, num_workers: int = 0, inline: bool = False) -> None:
        """Set up the world, the position, the driver and the copy, once the façade has its config and source."""
        c = self.config
        self.source, self.stats = source, stats
        watch_prepare()  # Accelerate loaded: record the loaders its prepare() is handed (``share_request``)
        # shard=False: the whole set, whatever the group; a sampler read as its indices: what it dealt this rank
        given = self._reads_sampler and self._follow is not None
        explicit = c.world_size is not None or c.shard is False or given
        self.world_size, self.rank = (resolve_world(c.world_size, c.rank) if c.world_size is not None else
                                      (1, 0) if c.shard is False or given else self._process_world())
        self._explicit_world, self._agreed = explicit, (0, 0)  # the world last agreed in
        # matched across ranks by where it was built and its role (a validation loader built on rank 0 alone in the
        # training loop's lines is not the training loader's match): the data's folder name (not its path: node-local
        # copies lie elsewhere; loaders built over a set() of names come in another order on each rank), batch size,
        # shuffle, drop_last, train
        data = str(getattr(self, "folder", "")).rstrip("/").rsplit("/", 1)[-1]
        role = "[" + ",".join([data] + [f"{getattr(c, k, None)}" for k in ("batch_size", "shuffle", "drop_last",
                                                                           "train")]) + "]"
        self._agreement = RankAgreement(construction_site(self, role))
        self.position = EpochPosition(seed=c.seed, world_size=self.world_size, dataset=fingerprint)
        self._plan_cache: tuple[tuple[int, ...], PassPlan] | None = None
        self.driver = PassDriver(source, stats, threads=threads, prefetch=prefetch, timeout=timeout,
                                 policy=c.on_error, inline=inline, by_samples=self._by_samples)
        self._copy = DeviceCopy(c.device)
        self._num_workers = num_workers  # as DataLoader's: the decode threads asked for (DALI runs its own)
        self._check_world()

    # -- what a kind of loader says --------------------------------------------------------
    def _epoch_total(self) -> int:
        """Positions in the current epoch's order (samples, or a text plan's batches)."""
        raise NotImplementedError

    def _make_plan(self) -> PassPlan:
        """This rank's batches from ``position.consumed`` on, in the current epoch."""
        raise NotImplementedError

    def _check_world(self) -> None:
        """Refuse a world that leaves the ranks no data (``partition.check_world``)."""

    def _move(self, host: HostBatch) -> Any:
        """``host`` on the device, as this loader hands it out (before the consumer's view of it); a batch the
        error policy emptied is counted, then dropped: its move may return None."""
        raise NotImplementedError

    def _share_settings(self) -> dict[str, Any]:
        """What decides the ranks' shares, compared across ranks at the first pass (``rank_agreement``)."""
        return {}

    def _counted(self, host: HostBatch) -> None:
        """Per-batch counts a kind keeps (a mixture's sources, tokens), as the batch is handed out."""

    def _accelerate_remainder(self, consumed: int) -> int:
        """Real rows of the ranks' last batches put end to end, for Accelerate's gather (0: none to drop)."""
        return 0

    def _waiting(self) -> str:
        """What a timed-out batch waits on (a remote read), for the timeout's message."""
        return ""

    # -- the plan ----------------------------------------------------------------------------
    def pass_plan(self) -> PassPlan:
        """This rank's batches in the next (or current) pass, made once per epoch, position and world."""
        self._follow_world()
        key = (self._next_pass_epoch(), self.position.consumed, self.world_size, self.rank, self._unpadded)
        if self._plan_cache is None or self._plan_cache[0] != key:
            self._plan_cache = (key, self._make_plan())
        return self._plan_cache[1]

    def _process_world(self) -> tuple[int, int]:
        """The process group's world; a drop-in's (``shard=None``) only where a framework asks for shares
        (``share_request``), else ``(1, 0)``: the whole set, as torch's DataLoader without a sampler."""
        world = resolve_world(None, None)
        if self.config.shard is not None or world[0] < 2:
            self._unpadded, self._whole_of = False, 0
            return world
        request = share_request(self)
        self._unpadded = request is Request.UNPADDED
        self._whole_of = world[0] if request is Request.NONE else 0
        return (1, 0) if request is Request.NONE else world

    def _world_changed(self, before: int) -> None:
        self._plan_cache = None
        self._check_world()
        log.info("%s(%s): rank %d of %d, from the process group started after the loader was built (it was built "
                 "for %d)", type(self).__name__, redact(self._describe()), self.rank, self.world_size, before)

    def _key(self, step: int) -> Any:
        """The seed key of the batch at global position ``step``: its crops', augmentation's and hooks' draws."""
        return self._key_type(seed=self.config.seed, epoch=self.epoch, rank=self.rank, step=step)

    # -- the pass --------------------------------------------------------------------------
    def _iterate(self, out: Callable[[Any, HostBatch], Any] | None = None) -> Iterator[Any]:
        """One pass of ``out(moved, host)`` (None: ``moved``), refused during another pass or after ``close``,
        closed at exit."""
        return close_at_exit(self._one_pass(self._pass(out)))

    def _pass(self, out: Callable[[Any, HostBatch], Any] | None) -> Iterator[Any]:
        """``out(moved, host)`` for each batch of the pass that kept a sample.

        ``stats.stages`` records ``wait`` (the consumer's time inside ``next()``) and ``pass``. The position moves
        as each batch is handed out, after the copy stage (which on CUDA moves the next batch first), so a
        ``state_dict()`` taken while the consumer holds batch k resumes at k + 1. One loop, no generator
        stacked on another: a text batch is ~30 us, and each layer costs a resume per batch.
        """
        self._follow_sampler_epoch()
        if self._whole_of and not self._said_whole:  # once per loader: earlier drop-ins took shares unasked
            self._said_whole = True
            face = self._built_as or f"{type(self).__name__}(shard=None)"  # the constructor the user called
            log.warning(whole_set_line(redact(f"{face}({self._describe()})"), face, self._whole_of,
                                       self._epoch_total(), "samples" if self._by_samples else "batches"))
        consumed = self.position.begin(self._epoch_total())
        self._agree_once()
        plan = self.pass_plan()
        self._digest_begin(plan, consumed)  # what this pass reads, checked by epoch_digest()
        times = self.stats.stages
        times.begin(self.epoch)
        start = time.perf_counter()
        wait: Any = times.range("wait").__enter__()
        hosts = self.driver.host_batches(plan, self._key if self._key_type is not None else None)
        read_before, failed_before = self.stats.samples_ok, len(self.stats.errors)
        try:
            with AcceleratePass(len(plan), self._accelerate_remainder(consumed)) as accelerate:
                step = accelerate.step if accelerate.live else None  # a call a batch saved when inert
                for moved, host in self._copy(hosts, self._move):
                    self._counted(host)
                    self._digest_batch(host)
                    self.position.advance(host.units)
                    self._agreement.poll()  # a rank that published after the first pass's wait
                    if step is not None:
                        step()
                    if len(host.samples):
                        wait, _ = None, wait.__exit__()
                        yield moved if out is None else out(moved, host)
                        wait = times.range("wait").__enter__()
                        if self._closed:  # close() in the loop's body: no read of the closed source
                            raise self._closed_mid_pass()
        except BatchTimeout as e:  # name the data set, and the read it waits on
            waiting = self._waiting()
            raise BatchTimeout(f"{self._describe()}: {e}" + (f"; {waiting}" if waiting else "")) from None
        except Exception:  # close() from another thread: the threads' shut pool, the closed files' errors
            if self._closed:
                raise self._closed_mid_pass() from None
            raise
        finally:
            if wait is not None:  # a profiler range is never left open, even when the pass raises
                wait.__exit__()
        times.add("pass", time.perf_counter() - start)
        self._every_sample_failed(read_before, failed_before)
        self.position.end()

    def _every_sample_failed(self, read_before: int, failed_before: int) -> None:
        """A pass whose every sample failed under skip or warn is not an empty epoch: a store gone, a folder
        unreadable. One line naming the first failure (an epoch of no batch would train on nothing, silently)."""
        failed = len(self.stats.errors) - failed_before
        if self.stats.samples_ok > read_before or not failed:
            return
        first = self.stats.errors[failed_before]
        raise TooManyErrors(redact(f"{self._describe()}: every sample of the pass failed ({failed} dropped under "
                                   f"on_error={self.config.on_error.value!r}); the first, {first['key']!r} in "
                                   f"{first['shard']}: {first['reason']}"))

    def _closed_mid_pass(self) -> LoaderClosed:
        """``close()`` during a pass: it was an IndexError from the closed files, or the pool's "cannot schedule
        new futures after shutdown"; the pass ends in one line, as a later pass does."""
        return LoaderClosed(f"{type(self).__name__} was closed during a pass over {redact(self._describe())}: "
                            "build a new one to read again")

    def _describe(self) -> str:
        """The data set as messages name it: its folder or URL (redacted where shown), or a mixture's sources."""
        return str(self.folder)

    def _agree_once(self) -> None:
        """At the first pass in each world (a pass before the process group started compared nothing): refuse ranks
        whose shares would overlap, on every rank. The data's fingerprint, its size and a mixture's weights are
        compared, never part of what matches loaders across ranks (``rank_agreement``)."""
        if self._agreed == (self.world_size, self.rank):
            return
        self._agreed = (self.world_size, self.rank)
        settings = {"dataset": self.position.dataset, "size": self._epoch_total(), "weights": self.config.weights,
                    "seed": self.config.seed, "epoch": self.epoch,
                    "world_size": self.world_size, "consumed": self.position.consumed, "drop_last": self.drop_last,
                    "even_batches": self.config.even_batches, "epoch_length": self.config.epoch_length,
                    "epoch_until": self.config.epoch_until, "shard": self.config.shard, **self._share_settings()}
        world, rank, wait = self.world_size, self.rank, None
        group = resolve_world(None, None) if world == 1 and self.config.shard is False else (1, 0)
        if group[0] > 1:  # shard=False in a process group: announced without a wait, so a rank reading a share
            world, rank, wait = group[0], group[1], 0.0  # at this site is refused naming shard (and it never waits)
        self._agreement.check(self._kind(), settings, world_size=world, rank=rank, wait=wait)

    def _kind(self) -> str:
        return type(self).__name__

    # -- the DataLoader surface -------------------------------------------------------------
    @property
    def drop_last(self) -> bool:
        return self.config.drop_last

    @property
    def pin_memory(self) -> bool:
        return self.config.pin_memory

    @property
    def num_workers(self) -> int:
        return self._num_workers

    @property
    def prefetch_factor(self) -> int:
        """Batches in flight per decode thread (DataLoader's ``prefetch_factor``)."""
        return self.driver.prefetch

    @property
    def timeout(self) -> float:
        return self.driver.timeout

    @property
    def persistent_workers(self) -> bool:
        """Always True: the decode threads live as long as the loader."""
        return True

    @property
    def sampler(self) -> EpochSampler:
        """``set_epoch``, ``len`` and this rank's sample ids of the pass (as a ``DistributedSampler``)."""
        return EpochSampler(self)

    @property
    def shared_epoch(self) -> SharedEpoch:
        """open_clip's ``SharedEpoch`` face over the epoch: ``DataInfo(loader, shared_epoch=loader.shared_epoch)``."""
        return SharedEpoch(self)

    @property
    def batch_sampler(self) -> EpochBatchSampler:
        """This rank's sample ids per batch of the pass (as DataLoader's ``BatchSampler``, over ``sampler``)."""
        return EpochBatchSampler(self, lambda: self.pass_plan().batch_ids())

    def sample_ids(self) -> np.ndarray:
        """This rank's sample ids of the next (or current) pass, in batch order."""
        return self.pass_plan().ids

    def __len__(self) -> int:
        """Batches of the epoch on this rank (as DataLoader's): this pass's, plus those yielded before a resume.

        Lightning counts a resumed epoch's steps from its checkpoint and ends
        the epoch at ``len``, as torchdata's ``StatefulDataLoader`` keeps it.
        """
        resumed = self.position.before + len(self.pass_plan())
        saved = self.position.saved_world
        if saved is None or saved == self.world_size:
            return resumed
        # A state saved on another world size: its _num_yielded counts the old ranks' batches, so before + rest is
        # this epoch's count as a framework restores it (Lightning ends the epoch there), while the epochs after
        # have this world's count; Lightning caches len once for all of them, so it is the larger of the two.
        return max(resumed, self._whole_epoch_batches())

    def _whole_epoch_batches(self) -> int:
        """This rank's batches in the whole current epoch on this world (its plan from the epoch's start)."""
        p = self.position
        consumed, p.consumed = p.consumed, 0
        try:
            return len(self._make_plan())
        finally:
            p.consumed = consumed

    def close(self) -> None:
        """Stop the decode threads and release the source's files, in bounded time; iterating again raises."""
        self._closed = True
        self.driver.close()
        self.source.close()

    def __getattr__(self, name: str) -> Any:
        """The parts' internals under the names the loaders gave them before the skeleton, for code that inspects
        them: ``_pool`` and ``_gate`` (the driver's decode threads and auto gate), ``_dali`` and ``_buffers``,
        ``_transfer`` (the device stage's finish)."""
        owner, attribute = _INTERNALS.get(name, (None, None))
        part = self.__dict__.get(owner) if owner else None
        if part is None or not hasattr(part, attribute):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(part, attribute)

    def __enter__(self) -> Any:  # the façade
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
