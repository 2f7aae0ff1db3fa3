"""dataio train on a mixture (issue 26): --train NAME=W:PATH and --mixture FILE, per-source logs, exact resume."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dataio import TextLoader
from dataio.cli import _parser, _train_data, main
from dataio.train.mixture_schedule import At, RunSchedule

ROOT = Path(__file__).resolve().parents[2]
WEIGHTS = {"web": 0.5, "code": 0.3, "books": 0.2}


def dataio(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataio", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    """Three token folders with one tokenizer, generated and converted with the CLI: web, code and books."""
    root = tmp_path_factory.mktemp("mixture-corpora")
    out: dict[str, Path] = {}
    for name, documents, words, seed in (("web", 240, 40, 1), ("code", 160, 15, 2), ("books", 40, 30, 3)):
        assert dataio("synth-text", str(root / f"{name}.txt"), "--documents", str(documents), "--mean-words",
                      str(words), "--seed", str(seed)).returncode == 0
        tokenizer = (["--train-tokenizer", "bpe", "--vocab-size", "400"] if not out else
                     ["--tokenizer", str(out["web"] / "tokenizer.json")])
        done = dataio("convert", "text", str(root / f"{name}.txt"), str(root / name), *tokenizer, "--max-length", "96",
                      "--no-progress")
        assert done.returncode == 0, done.stderr
        out[name] = root / name
    return out


def parse(*argv: str) -> dict:
    return _train_data(_parser().parse_args(["train", *argv]))


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


# -- the flags and the file -------------------------------------------------------------------------------------
def test_train_flags_give_the_sources_and_their_weights(corpora, tmp_path):
    fields = parse("--train", f"web=0.5:{corpora['web']}", "--train", "code=3e-1:s3://bucket/code",
                   "--epoch-until", "all")
    assert fields == {"train": {"web": corpora["web"], "code": "s3://bucket/code"},
                      "weights": {"web": 0.5, "code": 0.3}, "epoch_until": "all"}
    assert parse("--train", str(corpora["web"])) == {"train": corpora["web"]}  # one folder, as before
    assert parse("--train", "s3://bucket/a=1:b") == {"train": "s3://bucket/a=1:b"}  # a URL is never a source spec


def test_a_mixture_file_gives_a_schedule_relative_to_its_folder(corpora, tmp_path):
    (tmp_path / "data").symlink_to(corpora["web"].parent)
    mixture = write(tmp_path / "mix.json", {
        "sources": {"web": "data/web", "code": "data/code", "books": str(corpora["books"])},
        "schedule": [{"at": "90%", "weights": WEIGHTS},
                     {"at": 1.0, "weights": {"web": 0.2, "code": 0.3, "books": 0.5}}],
        "interpolation": "linear", "epoch_length": 64})
    fields = parse("--mixture", str(mixture))
    assert fields["train"] == {"web": tmp_path / "data/web", "code": tmp_path / "data/code", "books": corpora["books"]}
    schedule = fields["weights"]
    assert isinstance(schedule, RunSchedule) and schedule.names == ("web", "code", "books")
    assert [at for at, _ in schedule.points] == [At(fraction=0.9), At(fraction=1.0)]
    assert fields["epoch_length"] == 64
    assert parse("--mixture", str(mixture), "--epoch-until", "books")["epoch_until"] == "books"  # the flag wins
    assert "epoch_length" not in parse("--mixture", str(mixture), "--epoch-until", "books")


def test_a_yaml_mixture_file_needs_pyyaml_only_when_used(corpora, tmp_path, monkeypatch, capsys):
    text = (f"sources:\n  web: {corpora['web']}\n  code: {corpora['code']}\n"
            "schedule:\n  - at: 0\n    weights: {web: 1, code: 1}\n  - at: 25\n    weights: {web: 0, code: 1}\n")
    path = tmp_path / "mix.yaml"
    path.write_text(text)
    pytest.importorskip("yaml", reason="PyYAML is optional: without it the next case is the one that runs")
    fields = parse("--mixture", str(path))
    assert [at for at, _ in fields["weights"].points] == [At(step=0), At(step=25)]
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were not installed
    assert main(["train", "--mixture", str(path)]) == 2
    assert "is YAML, which needs PyYAML" in capsys.readouterr().err


def _bad_cases(corpora: dict[str, Path], tmp_path: Path) -> list[tuple[list[str], str]]:
    web, code = str(corpora["web"]), str(corpora["code"])
    good = {"sources": {"web": web, "code": code}, "weights": {"web": 0.5, "code": 0.5}}
    return [
        (["--train", f"web=abc:{web}"], "the weight 'abc' is not a number"),
        (["--train", f"web=-1:{web}", "--train", f"code=1:{code}"], "the weight must be a finite number >= 0"),
        (["--train", "web=0.5"], "(the path is missing)"),
        (["--train", "web=0.5:"], "(the path is missing)"),
        (["--train", f"=0.5:{web}"], "(the name is missing)"),
        (["--train", f"web=0.5:{tmp_path}/nowhere"], "nowhere does not exist"),
        (["--train", f"web=0.5:{web}", "--train", code], f"--train {code}: a mixture's sources are each NAME=W:PATH"),
        (["--train", web, "--train", code], "--train is given 2 times"),
        (["--train", f"web=1:{web}", "--train", f"web=2:{code}"], "source web is given twice"),
        (["--train", f"web=0:{web}", "--train", f"code=0:{code}"], "every weight is 0"),
        (["--train", f"we.b!=1:{web}"], "source name 'we.b!'"),
        (["--train", web, "--epoch-length", "10"], "--epoch-length and --epoch-until are for a mixture"),
        (["--train", f"web=1:{web}", "--epoch-until", "books"], "'books' is not a source (web) or 'all'"),
        ([], "give --train PATH, --train NAME=W:PATH"),
        (["--mixture", str(write(tmp_path / "a.json", good)), "--train", web], "give --train or --mixture, not both"),
        (["--mixture", str(tmp_path / "absent.json")], "absent.json cannot be read"),
        (["--mixture", str(write(tmp_path / "b.json", {**good, "weights": {"web": 1, "boks": 1}}))],
         "'boks' is not a source (web, code)"),
        (["--mixture", str(write(tmp_path / "c.json", {**good, "schedule": [{"at": "0%", "weights": {"web": 1}},
                                                                            {"at": "50%", "weights": {"bok": 1}}]}))],
         "give one of weights"),
        (["--mixture", str(write(tmp_path / "d.json", {"sources": good["sources"], "schedule": [
            {"at": "0%", "weights": {"web": 1, "code": 1}}, {"at": "50%", "weights": {"boks": 1}}]}))],
         "weights at 50%: 'boks' is not a source (web, code)"),
        (["--mixture", str(write(tmp_path / "e.json", {**good, "weights": {"web": -2, "code": 1}}))],
         "a weight must be a finite number >= 0, got web=-2"),
        (["--mixture", str(write(tmp_path / "f.json", {**good, "sources": {"web": "web-folder"}}))],
         f"sources.web: {tmp_path}/web-folder does not exist"),
        (["--mixture", str(write(tmp_path / "g.json", {**good, "weigths": {}}))], "unknown key(s) 'weigths'"),
        (["--mixture", str(_text(tmp_path / "h.json", '{"sources": {'))], "is not valid JSON: line 1 column 14"),
        (["--mixture", str(write(tmp_path / "i.json", {"sources": good["sources"], "epoch_until": "all", "schedule": [
            {"at": "90%", "weights": {"web": 1}}, {"at": "100%", "weights": {"code": 1}}]}))],
         "with epoch_until an epoch's length depends on the blend"),
    ]


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_each_bad_spec_is_one_line_and_exit_2(corpora, tmp_path, capsys):
    for argv, words in _bad_cases(corpora, tmp_path):
        assert main(["train", *argv, "--out", str(tmp_path / "run")]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("dataio train: error: ") and err.count("\n") == 1, (argv, err)
        assert words in err, (argv, err)
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_bad_spec_from_the_shell_has_no_traceback(corpora):
    done = dataio("train", "--train", f"web=0.5:{corpora['web']}", "--train", f"code=x:{corpora['code']}")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"dataio train: error: --train code=x:{corpora['code']}: the weight 'x' is not a number\n"


def _image_folder(root: Path, classes: list[str], seed: int) -> Path:
    """Small photos in class folders named ``classes``, converted to shards with the CLI."""
    photos = root / f"photos-{seed}"
    assert dataio("synth", str(photos), "--classes", str(len(classes)), "--per-class", "6", "--seed",
                  str(seed)).returncode == 0
    for i, name in enumerate(classes):  # synth names classes n00000000, ...: give each source its own list
        (photos / f"n{i:08d}").rename(photos / name)
    done = dataio("convert", "images", str(photos), str(root / f"shards-{seed}"), "--no-progress")
    assert done.returncode == 0, done.stderr
    return root / f"shards-{seed}"


def test_an_image_mixture_of_different_class_lists_trains_and_validates(tmp_path):
    """Two image sources with overlapping class lists: one combined class map for the model, the validation
    folder's labels (the second source's classes) mapped to it by name, per-source counts in log.csv."""
    first = _image_folder(tmp_path, ["cat", "dog"], seed=1)
    second = _image_folder(tmp_path, ["dog", "fox", "owl"], seed=2)
    val = _image_folder(tmp_path, ["dog", "fox", "owl"], seed=3)
    out = tmp_path / "run"
    done = dataio("train", "--train", f"pets=0.25:{first}", "--train", f"wild=0.75:{second}", "--val", str(val),
                  "--image-size", "32", "--batch-size", "4", "--epochs", "1", "--epoch-length", "16",
                  "--progress-every", "0", "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    steps, epochs = _rows(out)
    counts = np.array([[int(r["samples/pets"]), int(r["samples/wild"])] for r in steps])
    assert counts.sum() == 16 and counts.sum(0).tolist() == [4, 12]  # the weights, exactly over the epoch
    assert np.abs(np.cumsum(counts, 0) - np.cumsum(counts.sum(1))[:, None] * [0.25, 0.75]).max() < 1
    summary = json.loads((out / "log.json").read_text())
    assert "val_acc" in epochs[-1] and 0 <= float(epochs[-1]["val_acc"]) <= 1
    digest = summary["epochs"][-1]["digest"]  # the epoch proved against its plan: 16 samples, 4 and 12 a source
    assert digest["ok"] and digest["samples"] == 16 and digest["sources"] == [4, 12] and digest["ranks"] == 1
    checkpoint = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=False)
    head = [v for k, v in checkpoint["model"].items() if k.endswith("weight")][-1]
    assert head.shape[0] == 4, summary  # cat, dog, fox, owl: one output per combined class


def test_validation_classes_no_source_holds_are_refused(tmp_path, capsys):
    first = _image_folder(tmp_path, ["cat", "dog"], seed=4)
    val = _image_folder(tmp_path, ["cat", "eel"], seed=5)
    assert main(["train", "--train", f"a=1:{first}", "--train", f"b=1:{first}", "--val", str(val), "--out",
                 str(tmp_path / "run"), "--epochs", "1"]) == 2
    assert "val: classes ['eel'] are in no train source" in capsys.readouterr().err


# -- real runs ---------------------------------------------------------------------------------------------------
def _rows(out: Path) -> tuple[list[dict], list[dict]]:
    with open(out / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if r["lr"]], [r for r in rows if not r["lr"]]


def test_a_packed_mixture_logs_documents_that_follow_the_weights(corpora, tmp_path):
    out = tmp_path / "run"
    args = [a for name, w in WEIGHTS.items() for a in ("--train", f"{name}={w}:{corpora[name]}")]
    done = dataio("train", *args, "--model", "tiny_gpt", "--pack", "--batch-size", "4", "--block-size", "64",
                  "--epochs", "2", "--epoch-length", "150", "--optimizer", "adamw", "--progress-every", "0",
                  "--tensorboard", "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    steps, epochs = _rows(out)
    names = list(WEIGHTS)
    assert list(steps[0])[10:] == ([f"samples/{n}" for n in names] + [f"tokens/{n}" for n in names]
                                   + [f"passes/{n}" for n in names])
    documents = np.array([[int(r[f"samples/{n}"]) for n in names] for r in steps])
    tokens = np.array([[int(r[f"tokens/{n}"]) for n in names] for r in steps])
    assert (tokens.sum(1) == [int(r["samples"]) for r in steps]).all()  # a step's tokens, all from the sources
    assert documents.sum() == 300  # two epochs of 150 documents
    prefix = np.cumsum(documents, axis=0)  # documents begun by each step: a prefix of the blend
    owed = prefix.sum(1, keepdims=True) * np.array(list(WEIGHTS.values()))
    assert np.abs(prefix - owed).max() < 1  # within one document of the weights after every step
    books = len(TextLoader(corpora["books"]).shards)  # its samples (documents, long ones split)
    assert 30 < books <= 60
    assert [int(r["passes/books"]) for r in epochs] == [0, 1]  # 30 of books' documents an epoch
    lines = [line for line in done.stdout.splitlines() if line.startswith("epoch ")]
    assert "sources: web 75 samples" in lines[0] and "books 30 samples" in lines[0] and " 0 passes" in lines[0]
    summary = json.loads((out / "log.json").read_text())["summary"]
    assert summary["sources"]["web"]["samples"] == 150 and summary["sources"]["books"]["passes"] == 1
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(out / "tensorboard"))
    events.Reload()
    assert [e.value for e in events.Scalars("samples/code")] == [float(r["samples/code"]) for r in steps]
    assert [e.value for e in events.Scalars("passes/books")] == [0.0, 1.0]


def test_a_resumed_run_continues_the_anneal_exactly(corpora, tmp_path):
    mixture = write(tmp_path / "mix.json", {
        "sources": {name: str(corpora[name]) for name in WEIGHTS},
        "schedule": [{"at": "0%", "weights": {"web": 0.8, "code": 0.1, "books": 0.1}},
                     {"at": "60%", "weights": {"web": 0.8, "code": 0.1, "books": 0.1}},
                     {"at": "100%", "weights": {"web": 0.1, "code": 0.1, "books": 0.8}}]})
    args = ["train", "--mixture", str(mixture), "--model", "tiny_gpt", "--max-tokens", "768", "--epochs", "2",
            "--optimizer", "adamw", "--progress-every", "0", "--checkpoint-every", "10"]
    whole = dataio(*args, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert dataio(*args, "--out", str(tmp_path / "cut"), "--halt-after-steps", "47").returncode == 75
    resumed = dataio(*args, "--out", str(tmp_path / "cut"), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from step 40" in resumed.stdout
    (a_steps, a_epochs), (b_steps, b_epochs) = _rows(tmp_path / "whole"), _rows(tmp_path / "cut")
    columns = [c for c in a_steps[0] if "/" in c]
    assert [[r[c] for c in columns] for r in a_steps] == [[r[c] for c in columns] for r in b_steps]
    assert [[r[c] for c in columns] for r in a_epochs] == [[r[c] for c in columns] for r in b_epochs]
    def last_epoch(out: str) -> str:
        return next(line for line in out.splitlines() if line.startswith("epoch 2/2")).split("tokens/s")[1]

    assert last_epoch(whole.stdout) == last_epoch(resumed.stdout)  # the epoch's counts, from before the resume too
    a = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    assert a["step"] == b["step"] and all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    # budget mode blends batches, each one source's: the batches of each source follow the anneal
    batches = np.array([[int(r[f"samples/{n}"]) > 0 for n in WEIGHTS] for r in a_steps])
    assert (batches.sum(1) == 1).all()
    total = len(batches)
    head = batches[:int(total * 0.6)].sum(0)
    assert abs(head[0] - 0.8 * len(batches[:int(total * 0.6)])) <= 1  # 80% web until 60% of the run
    assert batches[int(total * 0.9):, 2].mean() > 0.5  # books lead by the end
    # the same checkpoint with the run one epoch longer: the breakpoints moved, refused in one line
    moved = dataio(*args, "--epochs", "3", "--out", str(tmp_path / "cut"), "--resume")
    assert moved.returncode == 1 and moved.stderr.count("\n") == 1
    assert "does not fit this run: its mixture differs: the weights: breakpoints at batches" in moved.stderr


def test_per_source_counts_are_all_ranks_together_under_torchrun(corpora, tmp_path):
    args = [a for name, w in WEIGHTS.items() for a in ("--train", f"{name}={w}:{corpora[name]}")]
    args += ["--model", "tiny_gpt", "--max-tokens", "1024", "--epochs", "1", "--progress-every", "0"]
    one = dataio("train", *args, "--out", str(tmp_path / "one"))
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
                          "dataio", "train", *args, "--out", str(tmp_path / "two")], capture_output=True, text=True,
                         timeout=300, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-3000:]

    def sources(out: str) -> str:
        return next(line for line in out.splitlines() if line.startswith("epoch 1/1")).split(" sources: ")[1]

    assert sources(one.stdout) == sources(two.stdout)  # the epoch's plan, world-size independent
    (steps_one, _), (steps_two, _) = _rows(tmp_path / "one"), _rows(tmp_path / "two")
    assert len(steps_two) == (len(steps_one) + 1) // 2  # a step takes a batch on each rank
    for name in WEIGHTS:
        assert sum(int(r[f"samples/{name}"]) for r in steps_one) == sum(int(r[f"samples/{name}"]) for r in steps_two)
    digests = [json.loads((tmp_path / run / "log.json").read_text())["epochs"][0]["digest"] for run in ("one", "two")]
    assert digests[0]["ok"] and digests[1]["ok"] and digests[1]["ranks"] == 2  # each epoch proved, on 1 and 2 ranks
