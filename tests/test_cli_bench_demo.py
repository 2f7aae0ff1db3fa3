"""The command line: exit codes, the benchmark report and the demo, run as a user would."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dataio", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _for_users(report: str) -> None:
    """A benchmark's report speaks of what was compared and the ratios, never of the developers' targets."""
    assert "compared on this machine (" in report
    assert not re.search(r"\btarget\b|\bmet\b", report), report


def test_convert_cli_exit_codes(image_folder, tmp_path, capsys):
    src = str(image_folder[0])
    assert main(["convert", "images", str(tmp_path / "nope"), str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["convert", "images", src, str(tmp_path / "out"), "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "packed 40 images" in out.out and "2 rejected" in out.out and "zz_empty.JPEG: empty file" in out.err
    assert main(["convert", "images", src, str(tmp_path / "out"), "--no-progress"]) == 2
    assert "not empty" in capsys.readouterr().err
    assert main(["convert", "images", src, str(tmp_path / "out"), "--no-progress", "--overwrite", "--strict"]) == 1
    assert main(["convert", "images", src, str(tmp_path / "o2"), "--shard-size", "12 parsecs"]) == 2
    assert "not a size" in capsys.readouterr().err


def test_cli_reads_worker_count_from_environment(image_folder, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DATAIO_NUM_WORKERS", "many")
    assert main(["convert", "images", str(image_folder[0]), str(tmp_path / "o"), "--no-progress"]) == 2
    assert "DATAIO_NUM_WORKERS" in capsys.readouterr().err


def test_bench_images_writes_table_json_and_png(image_folder, tmp_path):
    result = _run("bench", "images", str(image_folder[0]), "--out", str(tmp_path), "--batch-size", "16",
                  "--epochs", "1", "--warmup", "0", "--image-size", "64", "--workers", "2")
    assert result.returncode == 0, result.stderr
    for label in ("(a) standard", "(b) webdataset", "(c) DALI CPU", "(c') DALI CPU pipeline, no restart",
                  "(d) dataio", "(h) dataio.ShardDataset", "(a, eval) standard, Resize + CenterCrop",
                  "(d, eval) dataio.ImageLoader, train=False", "machine limit", "cores", "load average"):
        assert label in result.stdout
    report = json.loads((tmp_path / "images.json").read_text())
    rows = {row["loader"]: row["img_s"] for row in report["rows"]}
    assert set(rows) == {"standard", "webdataset", "shard_dataset", "dali_cpu", "dali_cpu_plain", "dataio",
                         "dataio_unchecked", "standard_eval", "dataio_eval", "dataio_mixture"}
    assert all(rate > 0 for rate in rows.values())
    # eval mode beside training: dataio's train=False against the standard recipe's Resize + CenterCrop
    assert report["checks"]["eval_vs_standard"]["value"] == pytest.approx(rows["dataio_eval"] / rows["standard_eval"])
    eval_ratio = report["checks"]["eval_vs_standard"]["value"]
    assert f"  (d, eval) dataio.ImageLoader, train=False vs (a, eval) Resize + CenterCrop: {eval_ratio:.2f}x" \
        in result.stdout
    by_name = {row["loader"]: row for row in report["rows"]}
    assert by_name["dataio_eval"]["vs_standard"] == pytest.approx(rows["dataio_eval"] / rows["standard_eval"])
    for name in ("standard", "standard_eval", "dataio", "dataio_eval"):  # the standard's worker processes count
        assert by_name[name]["cpu_us_per_image"] > 0 and by_name[name]["cpu_vs_standard"] > 0
    # every decode-thread stage of dataio beside the same work on one thread
    assert "dataio stages vs limits, CPU us/image" in result.stdout and "of which Huffman" in result.stdout
    for name in ("dataio", "dataio_eval", "dataio_unchecked"):
        limits = by_name[name]["stage_limits"]
        assert set(limits["ratio"]) == {"read", "decode", "resize"} and all(r > 0 for r in limits["ratio"].values())
        path = limits["single_thread_path_us"]
        material = [s for s, r in limits["ratio"].items()  # over by 10%, and by 1% of the single-thread path
                    if r > 1.10 and limits["loader_us"][s] - limits["limit_us"][s] > 0.01 * path]
        assert limits["at_limits"] == (not material and limits["overall_ratio"] <= 1.10)
        assert limits["threads"] == 2 and limits["parallel"]["ratio"].keys() == limits["ratio"].keys()
        assert limits["copy_us"] >= 0 and "entropy_us" in limits  # crops of 64 px here: DCT-scaled, no entropy
    assert set(report["stage_limits"]) == {"train", "eval"}
    assert report["stage_limits"]["eval"]["copy_gb_s"] > 0
    # ShardDataset under the standard recipe's transform and DataLoader, against the recipe itself
    assert report["checks"]["shard_dataset_vs_standard"]["value"] == pytest.approx(rows["shard_dataset"] / rows["standard"])
    ratio = report["checks"]["shard_dataset_vs_standard"]["value"]
    assert f"  (h) dataio.ShardDataset vs (a), under the same transform and DataLoader: {ratio:.2f}x" in result.stdout
    _for_users(result.stdout)
    # in turns: the rows whose ratio to the standard recipe is compared
    assert ("running (a) standard: ImageFolder + PIL + DataLoader, (h) dataio.ShardDataset + the standard transform "
            "+ DataLoader, (d) dataio.ImageLoader (turbo), (i) dataio.ImageLoader, a 3-source mixture of the same "
            "shards, (a, eval) standard, Resize + CenterCrop, (d, eval) dataio.ImageLoader, train=False (an epoch of "
            "each in turn)") in result.stdout
    # three sources of the same shards against one, in turns, and the ratio printed
    mixture = report["checks"]["mixture_vs_single"]["value"]
    assert mixture == pytest.approx(rows["dataio_mixture"] / rows["dataio"])
    assert f"  (i) dataio.ImageLoader, a mixture of 3 sources vs (d), one source, over the same images: {mixture:.2f}x" \
        in result.stdout
    # dataio is compared with the faster DALI row, and the report says so
    expected = rows["dataio"] / max(rows["dali_cpu"], rows["dali_cpu_plain"])
    assert report["checks"]["vs_dali_cpu"]["value"] == pytest.approx(expected)
    assert f"(d) dataio.ImageLoader vs the faster DALI CPU pipeline, (c) or (c'): {expected:.2f}x" in result.stdout
    assert report["machine"]["cores"] == os.cpu_count()
    assert (tmp_path / "images.png").stat().st_size > 1000
    checksum = report["sample_checksum"]  # the per-sample checksums' measured cost, printed too
    assert 0 < checksum["us_per_image"] and 0 < checksum["share_of_per_image_work"] < 1
    assert checksum["throughput_cost"] == pytest.approx(1 - rows["dataio"] / rows["dataio_unchecked"])
    assert "sample checksums (xxh3-64" in result.stdout


def test_bench_images_rounds_repeat_the_sequence(image_folder, tmp_path):
    result = _run("bench", "images", str(image_folder[0]), "--out", str(tmp_path), "--batch-size", "16",
                  "--epochs", "2", "--warmup", "0", "--image-size", "32", "--rounds", "2",
                  "--loaders", "standard,dataio")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "images.json").read_text())
    for row in report["rows"]:
        assert len(row["epochs"]) == 4 and len(row["round_img_s"]) == 2
    assert len(report["round_checks"]) == 2 and "rounds: " in result.stdout
    per_round = ", ".join(f"{r['vs_standard']['value']:.2f}" for r in report["round_checks"])
    assert f"(a) ImageFolder + PIL + DataLoader: {report['checks']['vs_standard']['value']:.2f}x (rounds: {per_round})" \
        in result.stdout
    assert "x 2 rounds" in result.stdout and "dataio's own path" in result.stdout


def test_bench_images_runs_the_ratio_rows_on_each_photo_class(tmp_path):
    root = tmp_path / "photos"
    args = ("bench", "images", str(root), "--out", str(tmp_path / "out"), "--photo-classes", "small,imagenet",
            "--photo-images", "6", "--batch-size", "4", "--epochs", "1", "--warmup", "0", "--image-size", "200",
            "--workers", "1", "--limit-images", "6")
    result = _run(*args)
    assert result.returncode == 0, result.stderr
    assert not result.stderr
    for photo_class in ("small", "imagenet"):  # generated once, under SRC, and reused
        assert f"generating 2 x 3 {photo_class} photos" in result.stdout
        assert len(list((root / photo_class).rglob("*.JPEG"))) == 6
    report = json.loads((tmp_path / "out" / "images-classes.json").read_text())
    assert set(report["classes"]) == set(report["summary"]) == {"small", "imagenet"}
    for photo_class, summary in report["summary"].items():
        rows = {row["loader"]: row for row in report["classes"][photo_class]["rows"]}
        assert set(rows) == {"standard", "dataio", "standard_eval", "dataio_eval"}
        for mode, ours, theirs in (("train", "dataio", "standard"), ("eval", "dataio_eval", "standard_eval")):
            entry = summary[mode]
            assert entry["vs_standard"] == pytest.approx(rows[ours]["img_s"] / rows[theirs]["img_s"])
            assert entry["cpu_vs_standard"] == pytest.approx(rows[theirs]["cpu_us_per_image"]
                                                             / rows[ours]["cpu_us_per_image"])
            limits = rows[ours]["stage_limits"]  # one thread: no parallel line, its verdict is the single-thread one
            assert limits["threads"] == 1 and limits["parallel"] is None
            assert entry["stages_at_limits"] == limits["at_limits"]
            if mode == "eval":  # centre crops of ~330 px to 200: decoded at full size, so the Huffman part is known
                assert 0 < limits["entropy_us"] < limits["limit_us"]["decode"]
            assert entry["stages"].startswith("at limits" if limits["at_limits"] else "over: ")
            assert f"{entry['vs_standard']:.2f}x ({entry['cpu_vs_standard']:.2f}x CPU; rounds " in result.stdout
    assert report["summary"]["imagenet"]["mean_image_kb"] > report["summary"]["small"]["mean_image_kb"]
    assert "dataio against the standard recipe by photo class, compared on this machine (" in result.stdout
    _for_users(result.stdout)
    assert (tmp_path / "out" / "images-classes.png").stat().st_size > 1000
    again = _run(*args)
    assert again.returncode == 0, again.stderr
    assert "generating" not in again.stdout
    assert main(["bench", "images", str(root), "--photo-classes", "tiny"]) == 2


def test_bench_images_compares_auto_threads_and_prints_stages(image_folder, tmp_path, capsys):
    assert main(["bench", "images", str(image_folder[0]), "--out", str(tmp_path), "--batch-size", "4",
                 "--epochs", "1", "--warmup", "0", "--image-size", "32", "--loaders", "dataio_t2,dataio_auto"]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "images.json").read_text())
    rows = {row["loader"]: row for row in report["rows"]}
    for row in rows.values():
        assert row["stages"]["us_per_image"]["decode"] > 0 and row["stages"]["us_per_image"]["wait"] > 0
    assert rows["dataio_t2"]["stages"]["threads"]["chosen"] == 2
    auto = report["auto_threads"]
    assert auto["best_fixed"] == "dataio_t2"
    assert auto["ratio"] == pytest.approx(rows["dataio_auto"]["img_s"] / rows["dataio_t2"]["img_s"])
    assert 1 <= auto["chosen_threads"][0] <= os.cpu_count()  # tuned during the warm-up before the timed epoch
    assert "dataio stages, us/image" in out and "num_workers=auto: " in out
    assert f"auto ran at {auto['ratio']:.3f}x its rate" in out and not re.search(r"\btarget\b|\bmet\b", out)


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    result = _run("demo", "--out", str(tmp_path / "demo"), "--classes", "2", "--per-class", "24", "--epochs", "1")
    assert result.returncode == 0, result.stderr
    assert "(d) dataio.ImageLoader vs (a) ImageFolder + PIL + DataLoader: " in result.stdout
    _for_users(result.stdout)
    assert (tmp_path / "demo" / "results" / "images.json").exists()


def test_installed_pil_is_pillow_simd_with_turbo():
    from dataio.formats.pil_build import pil_build

    build = pil_build()
    assert build["libjpeg_turbo"], build
    if os.environ.get("DATAIO_REQUIRE_SIMD", "1") == "1":
        assert build["simd"], f"PIL is not pillow-simd: {build} (run `make test`, which installs it last)"


def test_bench_augment_cli_reports_ratios(tmp_path, capsys):
    args = ["bench", "augment", "--out", str(tmp_path), "--device", "cpu", "--batch-size", "16",
            "--image-size", "64", "--repeats", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "vs kornia" in out and "PIL RandAugment(2, 9) per-image loop" in out
    result = json.loads((tmp_path / "augment-cpu.json").read_text())
    assert f"MixUp: dataio vs kornia.augmentation: {result['checks']['mixup_vs_kornia']['value']:.2f}x" in out
    assert "the per-image PIL loop in one thread" in out and "ms per batch of 16 on cpu" in out
    _for_users(out)
    assert [row["op"].split()[0] for row in result["rows"]] == ["randaugment", "mixup", "cutmix", "train"]
    assert all(row["dataio_img_s"] > 0 and row["vs_kornia"] > 0 for row in result["rows"])
    assert main(["bench", "augment", "--batch-size", "1"]) == 2
    assert "batch_size >= 2" in capsys.readouterr().err


def test_bench_text_cli_reports_padding_and_rates(tmp_path, capsys):
    assert main(["synth-text", str(tmp_path / "corpus.txt"), "--documents", "400", "--mean-words", "60"]) == 0
    args = ["bench", "text", str(tmp_path / "corpus.txt"), "--out", str(tmp_path), "--max-tokens", "2048",
            "--max-length", "256", "--vocab-size", "500", "--workers", "1", "--epochs", "1"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "usual: tokenise on the fly" in out and "memory-mapped read rate" in out
    result = json.loads((tmp_path / "text.json").read_text())
    checks = result["checks"]
    assert f"the usual recipe {checks['padding_usual']['value']:.1%}" in out
    assert f"ran at {checks['useful_vs_usual']['value']:.1f}x the usual recipe" in out
    _for_users(out)
    rows = {row["loader"]: row for row in result["rows"]}
    assert rows["dataio budget"]["padding"] < rows["dataio fixed"]["padding"]
    assert rows["dataio pack"]["padding"] == 0
    assert rows["dataio budget"]["batch_max"] > rows["dataio budget"]["batch_min"]
    assert "against plain numpy" in out
    reference = result["memory_reference"]
    assert [r["budget"] for r in reference] == [8192, 65536, 1 << 20]
    assert all(r["dataio_tok_s"] > 0 and r["numpy_tok_s"] > 0 and r["batches"] >= 1 for r in reference)
    mixture = result["mixture"]
    assert mixture["sources"] == 5 and mixture["ratio"] > 0 and "5-source mixture" in out
    assert abs(mixture["mixture_batches"] - mixture["batches"]) <= 5, mixture  # the same documents, one pass each
    assert main(["bench", "text", str(tmp_path / "corpus.txt"), "--max-tokens", "10", "--max-length", "100"]) == 2


def test_bench_sampler_cli_reports_shard_mixing(tmp_path, capsys):
    assert main(["bench", "sampler", "--out", str(tmp_path), "--num-samples", "20000", "--num-shards", "40"]) == 0
    out = capsys.readouterr().out
    assert "same-shard pairs" in out and "perfect global shuffle" in out
    result = json.loads((tmp_path / "sampler.json").read_text())
    rates = [row["same_shard_rate"] for row in result["rows"]]
    assert rates[0] > 0.9 > rates[-1] and rates == sorted(rates, reverse=True)  # bigger windows mix better


def test_bench_pairs_runs_open_clips_pipeline_and_dataio_on_the_same_tars_and_prints_the_ratio(tmp_path, capsys):
    args = ["bench", "pairs", str(tmp_path / "tars"), "--photos", "48", "--photo-class", "tiny", "--out",
            str(tmp_path / "out"), "--batch-size", "8", "--image-size", "32", "--workers", "2", "--epochs", "1",
            "--warmup", "0", "--vocab-size", "300"]
    assert main(args) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "out" / "pairs.json").read_text())
    assert result["num_pairs"] == 48 and result["tars"] == 4 and result["load_average"]  # 12 a tar: 2 per worker
    assert [row["loader"] for row in result["rows"]] == ["open_clip", "dataio", "dataio_tokenize"]
    assert all(row["pairs_per_epoch"] == [48] and row["pairs_s"] > 0 for row in result["rows"])  # the same pairs
    assert f"dataio (stored ids) ran at {result['ratio']:.2f}x its pairs/s" in out and "load average" in out
    _for_users(out)
    assert (tmp_path / "out" / "pairs.png").is_file()
    assert main([*args, "--photo-class", "huge"]) == 2
    assert "--photo-class must be one of" in capsys.readouterr().err
