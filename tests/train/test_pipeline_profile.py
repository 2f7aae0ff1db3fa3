"""dataio train --profile, the loader breakdown in the summary, and the verdict naming the bottleneck stage."""

from __future__ import annotations

import json

import pytest

from dataio.cli import main
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder
from dataio.train.bottleneck import diagnose
from dataio.train.chronometer import Chronometer


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("profile")
    write_image_folder(root / "src", SyntheticImagesConfig(num_classes=2, images_per_class=16, seed=4))
    convert_images(ConvertImagesConfig(src=root / "src", out=root / "shards", num_workers=1, progress=False))
    return root / "shards"


def test_train_profile_writes_a_trace_with_every_stage_and_a_breakdown(shards, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--train", str(shards), "--epochs", "1", "--image-size", "32", "--batch-size", "8",
                 "--out", str(out), "--workers", "auto", "--cpu-budget", "2", "--profile", "2"]) == 0
    printed = capsys.readouterr().out
    trace = json.loads((out / "profile" / "rank0.pt.trace.json").read_text())  # valid Chrome trace JSON
    names = {e.get("name") for e in trace["traceEvents"]}
    for stage in ("read", "decode", "resize", "plan", "decode_wait", "copy", "augment", "wait"):
        assert f"dataio.{stage}" in names, stage
    assert "ProfilerStep#1" in names  # the steps, as TensorBoard's profiler shows them
    summary = json.loads((out / "log.json").read_text())["summary"]
    assert summary["stages"]["decode"] > 0 and summary["decode_threads"] in (1, 2)
    assert summary["bottleneck"] in ("compute", "read", "decode", "resize", "plan", "copy", "augment")
    assert "loader stages: read=" in printed and f"bottleneck: {summary['bottleneck']}: " in printed
    assert "profile: " in printed


@pytest.mark.parametrize("flags", [["--workers", "many"], ["--cpu-budget", "0"], ["--cpu-budget", "2.5"],
                                   ["--profile", "0"]])
def test_bad_profile_and_thread_flags_exit_2(shards, tmp_path, flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--train", str(shards), "--out", str(tmp_path), *flags])
    assert exit_info.value.code == 2 and flags[0] in capsys.readouterr().err


def test_the_verdict_names_the_stage_that_set_the_pace():
    decode_bound = {"read": 0.4, "decode": 8.0, "resize": 2.0, "plan": 0.1, "decode_wait": 3.0, "copy": 0.2,
                    "augment": 0.5, "wait": 4.0}
    verdict = diagnose(decode_bound, threads=4, input_bound=True)
    assert verdict["bottleneck"] == "decode" and "threads" in verdict["advice"] and "DALI" in verdict["advice"]
    assert "--max-side" in verdict["advice"]
    resize_bound = {**decode_bound, "decode": 1.0, "resize": 6.0}
    assert "crop_on_device" in diagnose(resize_bound, threads=4, input_bound=True)["advice"]
    # thread stages are shared by the threads: 8 s of decode over 16 threads is less than 1 s of augment
    assert diagnose({**decode_bound, "augment": 1.0}, threads=16, input_bound=True)["bottleneck"] == "augment"
    text = {"read": 0.2, "collate": 1.5, "copy": 0.1, "wait": 2.0}
    assert "--pack" in diagnose(text, threads=1, input_bound=True)["advice"]
    assert diagnose(decode_bound, threads=4, input_bound=False)["bottleneck"] == "compute"
    assert "--pack" in diagnose(text, threads=1, input_bound=False, unit="tokens")["advice"]


def test_a_packed_run_is_not_told_to_pack():
    text = {"read": 0.2, "collate": 1.5, "copy": 0.1, "wait": 2.0}
    for input_bound in (True, False):
        advice = diagnose(text, threads=1, input_bound=input_bound, unit="tokens", packed=True)["advice"]
        assert "--pack" not in advice and "--max-tokens" in advice
    clock = Chronometer(unit="tokens")
    clock.step_done(epoch=0, wait=0.5, samples=800, loss=1.0, lr=0.1)  # input-bound
    summary = clock.summary(0, {"stages": text, "threads": 1, "packed": True})
    assert summary["bottleneck"] == "collate" and "--pack" not in summary["advice"]
    assert "--pack" in clock.summary(0, {"stages": text, "threads": 1})["advice"]  # a padded run is


def test_chronometer_summary_carries_the_diagnosis():
    clock = Chronometer()
    clock.step_done(epoch=0, wait=0.5, samples=8, loss=1.0, lr=0.1)  # compute ~0: input-bound
    summary = clock.summary(0, {"stages": {"decode": 3.0, "decode_wait": 1.0, "resize": 0.1}, "threads": 2})
    assert summary["verdict"] == "input-bound" and summary["bottleneck"] == "decode"
    assert "bottleneck=decode" in Chronometer.summary_line(summary)
    assert Chronometer.breakdown_lines(summary)[1].startswith("bottleneck: decode: more decode threads")
