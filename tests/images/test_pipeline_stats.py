"""Seeing the pipeline: per-stage times in loader.stats, profiler ranges on their threads, num_workers=auto."""

from __future__ import annotations

import json

import pytest
import torch

from dataio import ImageLoader, TextLoader
from dataio.pipeline.stage_times import all_threads_config

IMAGE_STAGES = ("read", "decode", "resize", "plan", "decode_wait", "copy", "augment", "wait", "pass")


def test_every_image_stage_is_timed_per_epoch_and_errors_still_reported(image_shards):
    with ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=2) as loader:
        for _ in range(2):
            assert sum(len(labels) for _, labels in loader) > 0
        stats = loader.stats.as_dict()
    assert set(stats["stages"]) == {"0", "1"}  # one entry per epoch
    for stage in IMAGE_STAGES:
        assert stats["stages"]["0"][stage]["seconds"] > 0, stage
    assert stats["num_errors"] == 0 and stats["samples_ok"] > 0  # ErrorStats's fields are kept
    assert stats["threads"] == {"mode": "fixed", "chosen": 2}
    epoch = stats["stages"]["1"]
    wall = epoch["pass"]["seconds"]
    assert epoch["wait"]["seconds"] <= wall * 1.01  # the consumer waited at most the whole pass
    assert epoch["decode_wait"]["seconds"] <= epoch["wait"]["seconds"]
    threads = sum(epoch[s]["seconds"] for s in ("read", "decode", "resize"))
    assert threads <= wall * 2 * 1.1 + 0.01  # two threads cannot spend more than twice the wall time
    assert epoch["decode"]["calls"] == loader.num_samples()  # counted per image


def test_stages_add_up_to_the_wall_time_when_one_thread_does_everything(image_shards):
    with ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=0) as loader:
        list(loader)
        seconds = loader.stats.breakdown(0)
    work = sum(seconds[s] for s in ("read", "decode", "resize", "plan", "copy", "augment"))
    # one thread: the stages are the pass, less the untimed glue (checksums of bookkeeping, the generator)
    assert 0.6 * seconds["pass"] <= work <= seconds["pass"] * 1.01, seconds


def test_text_loader_times_read_collate_copy_and_wait(text_shards):
    loader = TextLoader(text_shards, mode="pack", block_size=64, batch_size=4)
    batches = sum(1 for _ in loader)
    epoch = loader.stats.as_dict()["stages"]["0"]
    for stage in ("read", "collate", "copy", "wait", "pass"):
        assert epoch[stage]["seconds"] > 0, stage
    assert epoch["copy"]["calls"] == batches
    assert epoch["read"]["seconds"] + epoch["collate"]["seconds"] <= epoch["pass"]["seconds"] * 1.01


def test_profile_ranges_appear_on_the_decode_threads(image_shards, tmp_path):
    loader = ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=2, profile=True)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                experimental_config=all_threads_config()) as profiler:
        list(loader)
    loader.close()
    trace = tmp_path / "trace.json"
    profiler.export_chrome_trace(str(trace))
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if str(e.get("name", "")).startswith("dataio.")]
    threads = {}
    for event in events:
        threads.setdefault(event["name"], set()).add(event["tid"])
    assert set(threads) >= {"dataio." + s for s in IMAGE_STAGES if s != "pass"}
    assert not threads["dataio.decode"] & threads["dataio.wait"]  # decoded on other threads than the consumer's


def test_auto_threads_tune_within_the_budget_and_say_so(image_shards):
    loader = ImageLoader(image_shards, batch_size=2, image_size=32, num_workers="auto", cpu_budget=2)
    assert loader.config.threads == 2 and loader.stats.threads["mode"] == "auto"
    for _ in range(10):
        list(loader)
        if loader.stats.tuner.done:
            break
    loader.close()
    threads = loader.stats.as_dict()["threads"]
    assert threads["chosen"] in (1, 2) and threads["max_threads"] == 2
    assert {t["threads"] for t in threads["trials"]} == {1, 2} and all(t["img_s"] > 0 for t in threads["trials"])


@pytest.mark.parametrize("options", [{"num_workers": "many"}, {"num_workers": -1}, {"cpu_budget": 0},
                                     {"cpu_budget": 1.5}, {"cpu_budget": True}])
def test_bad_thread_options_are_named(image_shards, options):
    name = next(iter(options))
    with pytest.raises(ValueError, match=name):
        ImageLoader(image_shards, **options)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_stages_are_device_times_and_nvtx_ranges(image_shards):
    # on CUDA the copy and augmentation are timed with events on the side stream; NVTX ranges need CUDA
    with ImageLoader(image_shards, batch_size=8, image_size=32, num_workers=2, device="cuda", decoder="turbo",
                     pin_memory=True, normalize=True, profile=True) as loader:
        assert loader.stats.stages.nvtx
        list(loader)
        seconds = loader.stats.breakdown(0)
    assert seconds["copy"] > 0 and seconds["augment"] > 0
