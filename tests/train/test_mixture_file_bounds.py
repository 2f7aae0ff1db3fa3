"""``dataio train``'s mixture inputs cost bounded time and memory (issue 33), as a user meets them: the CLI in a
subprocess under an address-space cap (``prlimit``) and ``timeout``.

A few hundred bytes of YAML aliases (the "billion laughs") ran for ever and grew memory until killed: the value
was expanded when an error message formatted it. ``--mixture /dev/zero`` read for ever; JSON nested 100,000 deep
was a RecursionError traceback; a 400-digit weight an OverflowError traceback. Extreme but finite numbers (weights
near the float maximum, a breakpoint at step 9e18, an epoch length of 1e20) gave a false message or a traceback,
and a weight of 1e-30 hung the blend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dataio.cli import _parser, _train_data
from dataio.train.mixture_schedule import At, RunSchedule, RunUnits

ROOT = Path(__file__).resolve().parents[2]
CAP = "--as=2000000000"  # bytes of address space: the old expansion died of MemoryError under it
BOMB_CHAIN = ", ".join(['&a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] +
                       [f"&{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)])


def dataio_capped(*args: str, seconds: int = 60) -> subprocess.CompletedProcess:
    """``dataio ARGS`` under ``prlimit`` (address space) and ``timeout`` (SIGKILL after ``seconds``)."""
    command = ["prlimit", CAP, "timeout", "-s", "KILL", str(seconds), sys.executable, "-m", "dataio", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30, cwd=ROOT)


def one_line(done: subprocess.CompletedProcess, code: int = 2) -> str:
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(done.stderr) < 400, done.stderr[:1000]
    return done.stderr.rstrip("\n")


@pytest.fixture
def folders(tmp_path) -> Path:
    for name in ("web", "code"):
        (tmp_path / name).mkdir()
    return tmp_path


SOURCES = "sources: {web: web, code: code}\n"
BOMBS = {  # a billion laughs wherever a message would show the value
    "epoch_length": f"{SOURCES}weights: {{web: 1, code: 1}}\nepoch_length: [{BOMB_CHAIN}]\n",
    "weights": f"{SOURCES}weights: [{BOMB_CHAIN}]\n",
    "schedule": f"{SOURCES}schedule: [{BOMB_CHAIN}]\n",
    "a source": f"sources: {{web: [{BOMB_CHAIN}]}}\nweights: {{web: 1}}\n",
    "interpolation": f"{SOURCES}weights: {{web: 1, code: 1}}\ninterpolation: [{BOMB_CHAIN}]\n",
    "epoch_until": f"{SOURCES}weights: {{web: 1, code: 1}}\nepoch_until: [{BOMB_CHAIN}]\n",
    "merge keys": f"{SOURCES}weights: {{web: 1, code: 1}}\nepoch_until: " + "{<<: [" + ", ".join(
        ["&m0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8, k8: 9}"] +
        [f"&m{i} {{<<: [{', '.join([f'*m{i - 1}'] * 9)}]}}" for i in range(1, 9)]) + "]}\n",
}


@pytest.mark.parametrize("where", list(BOMBS))
def test_a_billion_laughs_is_refused_in_bounded_time_and_memory(where, folders):
    pytest.importorskip("yaml", reason="PyYAML is optional: without it a YAML file is refused in one line")
    path = folders / "mix.yaml"
    path.write_text(BOMBS[where])
    assert path.stat().st_size < 1000  # a few hundred bytes
    line = one_line(dataio_capped("train", "--mixture", str(path), "--out", str(folders / "run")))
    assert line == f"dataio train: error: mixture file {path} is refused: its aliases expand to more than " \
                   "1,000,000 values"


def test_hostile_mixture_files_are_one_line_each(folders):
    pytest.importorskip("yaml", reason="PyYAML is optional: without it a YAML file is refused in one line")
    files = {"self.yaml": f"{SOURCES}weights: {{web: 1, code: 1}}\nepoch_length: &a [*a]\n",
             "deep.json": "[" * 100_000, "deep.yaml": "[" * 100_000,
             "digits.json": f'{{"sources": {{"web": "web"}}, "weights": {{"web": 1}}, "epoch_length": 1{"0" * 5000}}}',
             "digits.yaml": f"{SOURCES}weights: {{web: 1, code: 1}}\nepoch_length: 1{'0' * 5000}\n",
             "weight.json": f'{{"sources": {{"web": "web", "code": "code"}}, "weights": {{"web": 1{"0" * 400}, '
                            '"code": 1}}',
             "keys.json": json.dumps({"sources": {"web": "web"}, **{f"key{i}": i for i in range(50_000)}})}
    expected = {"self.yaml": "is refused: an alias refers to itself (line 3)", "deep.json": "nests too deeply",
                "deep.yaml": "nests too deeply", "digits.json": "is not valid JSON: Exceeds the limit (4300 digits)",
                "digits.yaml": "is not valid YAML: Exceeds the limit (4300 digits)",
                "weight.json": "weights at step 0: a weight must be a finite number >= 0, got web=inf",
                "keys.json": "unknown key(s) 'key0', 'key1', 'key2', 'key3', 'key4' and 49,995 more"}
    for name, text in files.items():
        (folders / name).write_text(text)
        line = one_line(dataio_capped("train", "--mixture", str(folders / name)))
        assert line.startswith(f"dataio train: error: mixture file {folders / name}"), line
        assert expected[name] in line, line
    line = one_line(dataio_capped("train", "--mixture", "/dev/zero"))
    assert line == "dataio train: error: mixture file /dev/zero: not a regular file: character device"  # unread


def test_mixture_numbers_are_range_checked_naming_the_parameter(folders):
    def mixture(name: str, **fields) -> str:
        path = folders / name
        path.write_text(json.dumps({"sources": {"web": "web", "code": "code"}, **fields}))
        return str(path)

    blend = {"web": 1, "code": 1}
    cases = [
        (["--mixture", mixture("step.json", schedule=[{"at": 0, "weights": blend},
                                                       {"at": 9 * 10**18, "weights": {"web": 1}}])],
         "a breakpoint's step must be >= 0 and at most 4,611,686,018,427,387,903, got 9000000000000000000"),
        (["--mixture", mixture("length.json", weights=blend, epoch_length=10**20)],
         "epoch_length must be an integer, >= 1 and at most 2,147,483,648, got 100000000000000000000"),
        (["--mixture", mixture("float.json", weights=blend, epoch_length=1e20)],
         "epoch_length must be an integer, >= 1 and at most 2,147,483,648, got 1e+20"),
        (["--mixture", mixture("ok.json", weights=blend), "--epoch-length", str(10**20)],
         "--epoch-length must be >= 1 and at most 2,147,483,648 (an integer: an epoch is held in memory), got "
         "100000000000000000000"),
        (["--train", f"web=1:{folders / 'web'}", "--train", f"code=1e999:{folders / 'code'}"],
         "the weight must be a finite number >= 0, got 1e999"),
    ]
    for argv, words in cases:
        line = one_line(dataio_capped("train", *argv, "--out", str(folders / "run")))
        assert line.startswith("dataio train: error: ") and words in line, (argv, line)
    assert not (folders / "run").exists()
    # weights near the float maximum are a blend like any other: their ratio
    fields = _train_data(_parser().parse_args(["train", "--mixture", mixture("huge.json", weights={
        "web": 1.7e308, "code": 1.7e308})]))
    assert fields["weights"].resolve(None).arrays()[1].tolist() == [[0.5, 0.5]]


def test_a_legitimate_yaml_alias_still_reads(folders):
    pytest.importorskip("yaml", reason="PyYAML is optional")
    path = folders / "mix.yaml"
    path.write_text(f"{SOURCES}schedule:\n  - {{at: 0, weights: &start {{web: 3, code: 1}}}}\n"
                    "  - {at: 50%, weights: *start}\n  - {at: 100%, weights: {<<: *start, code: 3}}\n")
    schedule = _train_data(_parser().parse_args(["train", "--mixture", str(path)]))["weights"]
    assert [weights for _, weights in schedule.points] == [(3.0, 1.0), (3.0, 1.0), (3.0, 3.0)]


@pytest.mark.parametrize("weights", [("1", "1e-30"), ("1e308", "1e308")])
def test_dataio_train_blends_tiny_and_huge_weights(weights, text_shards, tmp_path):
    """A weight of 1e-30 hung the blend for ever (killed by timeout); 1e308 twice was 'every source has weight 0'."""
    out = tmp_path / "run"
    done = dataio_capped("train", "--train", f"web={weights[0]}:{text_shards}", "--train",
                         f"code={weights[1]}:{text_shards}", "--model", "tiny_gpt", "--max-tokens", "512",
                         "--epochs", "1", "--epoch-length", "6", "--progress-every", "0", "--device", "cpu",
                         "--out", str(out), seconds=240)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert (out / "checkpoint.pt").exists()


API_SCRIPT = """
import json, sys
from dataio import TextLoader
from dataio.train.config import TrainConfig
from dataio.train.mixture_schedule import At, RunSchedule
bomb = ["lol"] * 9
for _ in range(9):
    bomb = [bomb] * 9  # 9**10 strings, shared: free to hold, endless to show
folder = sys.argv[1]
calls = {
    "TrainConfig weights": lambda: TrainConfig(train={"web": folder}, weights=bomb),
    "TrainConfig a weight": lambda: TrainConfig(train={"web": folder}, weights={"web": bomb}),
    "TrainConfig epoch_length": lambda: TrainConfig(train={"web": folder}, weights={"web": 1}, epoch_length=bomb),
    "a breakpoint": lambda: At.parse(bomb),
    "RunSchedule interpolation": lambda: RunSchedule.of({"web": 1}, ["web"], interpolation=bomb),
    "TextLoader weights": lambda: TextLoader({"web": folder}, weights=bomb),
    "TextLoader a breakpoint": lambda: TextLoader({"web": folder}, weights=[(bomb, {"web": 1})]),
    "TextLoader epoch_length": lambda: TextLoader({"web": folder}, weights={"web": 1}, epoch_length=bomb),
}
out = {}
for name, call in calls.items():
    try:
        call()
        out[name] = "accepted"
    except (ValueError, TypeError) as e:
        out[name] = str(e)
print(json.dumps(out))
"""


def test_no_message_formats_an_unbounded_value(text_shards):
    """The same values through the Python API (``TrainConfig``, ``RunSchedule``, ``TextLoader``): each is
    refused in one short line, under the cap and the timeout (``f"{value!r:.80}"`` built the whole repr)."""
    command = ["prlimit", CAP, "timeout", "-s", "KILL", "60", sys.executable, "-c", API_SCRIPT, str(text_shards)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    for call, message in json.loads(done.stdout).items():
        assert message != "accepted" and "\n" not in message and len(message) < 300, (call, message)
        assert "[[[...], [...], [...], ...]" in message or "epoch_length" in message, (call, message)


def test_breakpoints_placed_past_the_last_position_are_refused_naming_them():
    """A breakpoint within range can still land past 2**62 - 1 once placed in units: a fraction of an absurd
    run (the float product overflowed: OverflowError), a step times the units a step reads."""
    schedule = RunSchedule.of([("0%", {"a": 1, "b": 1}), ("50%", {"a": 1, "b": 0})], ["a", "b"])
    absurd = RunUnits(epochs=10**400, epoch_units=40, per_step=1.0, unit="batches")
    assert absurd.position(At(fraction=0.0)) == 0
    with pytest.raises(ValueError, match="the breakpoint at 50% falls past unit 4,611,686,018,427,387,903 of the "
                                         "run .<an integer of about 400 digits> epoch.s. 40 batches each"):
        schedule.resolve(absurd)
    steps = RunSchedule.of([(0, {"a": 1, "b": 1}), (2 * 10**18, {"a": 1, "b": 0})], ["a", "b"])
    run = RunUnits(epochs=1, epoch_units=1000, per_step=256.0, unit="samples")
    with pytest.raises(ValueError, match="the breakpoint at step 2000000000000000000 falls past unit"):
        steps.resolve(run)
