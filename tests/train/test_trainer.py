"""dataio train: models, optimizer groups, learning, kill-and-resume, DDP under torchrun, text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dataio.cli import main
from dataio.train.models import build_image_model, build_text_model
from dataio.train.config import TrainConfig
from dataio.train.trainer import make_optimizer, train
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.images.synthetic import SyntheticImagesConfig, write_image_folder

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def learnable(tmp_path_factory) -> tuple[Path, Path]:
    """4 classes with distinct palettes and shapes: train (4 x 48) and val (4 x 16) shards."""
    root = tmp_path_factory.mktemp("learnable")
    out = []
    for name, per_class, seed in (("train", 48, 0), ("val", 16, 1)):
        write_image_folder(root / name, SyntheticImagesConfig(num_classes=4, images_per_class=per_class, seed=seed))
        convert_images(ConvertImagesConfig(src=root / name, out=root / f"{name}-shards", max_shard_samples=40,
                                           num_workers=1, progress=False))
        out.append(root / f"{name}-shards")
    return out[0], out[1]


def cli(*args: str, torchrun: int = 0) -> subprocess.CompletedProcess:
    prefix = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun}",
              "-m", "dataio"] if torchrun else [sys.executable, "-m", "dataio"]
    return subprocess.run(prefix + list(args), capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_resnets_follow_the_recipe():
    for name, width in (("resnet18", 512), ("resnet50", 2048)):
        model = build_image_model(name, 10)
        assert model.head.in_features == width
        convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert all(conv.bias is None for conv in convs)
        last_bns = [block.branch[-1] for block in model.features if hasattr(block, "branch")]
        assert last_bns and all(bn.weight.abs().sum() == 0 for bn in last_bns)
        assert model(torch.randn(2, 3, 64, 64)).shape == (2, 10)
    with pytest.raises(ValueError, match="unknown image model"):
        build_image_model("vit_huge", 10)


def test_no_weight_decay_on_norms_and_biases(tmp_path):
    model = build_image_model("small_cnn", 3)
    optimizer = make_optimizer(model, TrainConfig(train=tmp_path, weight_decay=0.1))
    decayed, plain = optimizer.param_groups
    assert decayed["weight_decay"] == 0.1 and all(p.ndim > 1 for p in decayed["params"])
    assert plain["weight_decay"] == 0.0 and all(p.ndim == 1 for p in plain["params"]) and plain["params"]


def test_packed_documents_do_not_attend_across_boundaries():
    model = build_text_model("tiny_gpt", 50, 32).eval()
    ids = torch.randint(0, 50, (1, 12))
    positions = torch.cat([torch.arange(5), torch.arange(7)])[None]
    documents = (positions == 0).cumsum(1)
    changed = ids.clone()
    changed[0, :5] = (changed[0, :5] + 1) % 50  # edit only the first document
    a, b = model(ids, positions, documents), model(changed, positions, documents)
    assert torch.allclose(a[0, 5:], b[0, 5:], atol=1e-5) and not torch.allclose(a[0, :5], b[0, :5])


def test_small_cnn_learns_and_writes_its_log(learnable, tmp_path, capsys):
    train_shards, val_shards = learnable
    summary = train(TrainConfig(train=train_shards, val=val_shards, model="small_cnn", epochs=4, image_size=32,
                                batch_size=16, out=tmp_path / "run", num_workers=1, lr=0.05))
    out = capsys.readouterr().out
    assert out.count("val_acc=") == 5 and "verdict=" in out  # 4 epochs and the summary
    log = json.loads((tmp_path / "run" / "log.json").read_text())
    losses = [s["loss"] for s in log["steps"]]
    assert sum(losses[-4:]) < sum(losses[:4])
    assert summary["val_acc"] > 0.6  # chance is 0.25
    assert summary["verdict"] in ("input-bound", "compute-bound") and 0 <= summary["input_wait_share"] <= 1
    assert (tmp_path / "run" / "train.png").stat().st_size > 0
    assert [e["epoch"] for e in log["epochs"]] == [0, 1, 2, 3]


def test_killed_run_resumes_to_the_same_weights(learnable, tmp_path):
    train_shards, _ = learnable
    args = ["train", "--train", str(train_shards), "--epochs", "2", "--image-size", "32", "--batch-size", "16",
            "--workers", "1", "--checkpoint-every", "3", "--randaugment", "5", "--mixup", "0.2"]
    assert cli(*args, "--out", str(tmp_path / "whole")).returncode == 0
    killed = cli(*args, "--out", str(tmp_path / "cut"), "--halt-after-steps", "8")
    assert killed.returncode == 75  # exited abruptly after step 8; the last checkpoint is step 6
    resumed = cli(*args, "--out", str(tmp_path / "cut"), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from step 6" in resumed.stdout
    whole = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=True)
    cut = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    assert whole["step"] == cut["step"] == 24
    for name, tensor in whole["model"].items():
        assert torch.equal(tensor, cut["model"][name]), f"{name} differs after the resume"


def test_ddp_training_under_torchrun(learnable, tmp_path):
    train_shards, val_shards = learnable
    done = cli("train", "--train", str(train_shards), "--val", str(val_shards), "--epochs", "2", "--image-size", "32",
               "--batch-size", "8", "--workers", "1", "--out", str(tmp_path / "ddp"), torchrun=2)
    assert done.returncode == 0, done.stderr[:6000]
    assert done.stdout.count("val_acc=") == 3  # printed once (rank 0) per epoch, plus the summary
    assert "step=24 " in done.stdout  # 192 samples / (2 ranks x 8) = 12 steps per epoch


def test_text_model_trains_on_token_shards(text_shards, tmp_path, capsys):
    assert main(["train", "--train", str(text_shards), "--val", str(text_shards), "--model", "tiny_gpt",
                 "--epochs", "3", "--optimizer", "adamw", "--max-tokens", "2048", "--out", str(tmp_path / "lm")]) == 0
    out = capsys.readouterr().out
    losses = [float(part.split("=")[1]) for part in out.split() if part.startswith("val_loss=")]
    assert len(losses) == 4 and losses[2] < losses[0]
    assert "tokens/s" in out


def test_bad_options_are_usage_errors(tmp_path, capsys):
    assert main(["train", "--train", str(tmp_path), "--image-size", "50"]) == 2
    assert "multiple of 32" in capsys.readouterr().err


_WRITER = """
import os, signal, sys, time
from pathlib import Path
from dataio.formats.files import atomic_writer
with atomic_writer(Path(sys.argv[1]) / "checkpoint.pt") as f:
    f.write(b"PK" + os.urandom(1 << 20))  # a megabyte of a checkpoint, then killed mid-save (or kept writing)
    f.flush()
    print("writing", flush=True)
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)
"""


def test_trainer_removes_temp_checkpoints_of_killed_writers_only(learnable, tmp_path):
    """Issue 25 §9: a SIGKILL mid-save leaves .checkpoint.pt.tmp-HOST-PID; the next start removes it, never a
    live writer's."""
    train_shards, _ = learnable
    out = tmp_path / "run"
    out.mkdir()
    killed = subprocess.run([sys.executable, "-c", _WRITER, str(out), "kill"], capture_output=True, text=True,
                            timeout=60)
    assert killed.returncode == -9
    (dead,) = out.glob(".checkpoint.pt.tmp-*")
    live = subprocess.Popen([sys.executable, "-c", _WRITER, str(out), "live"], stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline().strip() == "writing"
        (live_tmp,) = set(out.glob(".checkpoint.pt.tmp-*")) - {dead}
        run = cli("train", "--train", str(train_shards), "--epochs", "1", "--image-size", "32", "--batch-size", "32",
                  "--workers", "1", "--out", str(out))
        assert run.returncode == 0, run.stderr[-2000:]
        assert not dead.exists()
        assert live_tmp.exists()  # its writer is alive: not touched
        assert (out / "checkpoint.pt").is_file()
    finally:
        live.kill()
        live.wait()


def test_stale_temps_of_other_hosts_are_left_alone(tmp_path):
    from dataio.formats.files import remove_stale_temps

    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout.strip()
    other_host = tmp_path / f".checkpoint.pt.tmp-another-node-{dead_pid}"
    legacy = tmp_path / f".checkpoint.pt.tmp-{dead_pid}"  # written before temp names carried the host
    for path in (other_host, legacy):
        path.write_bytes(b"x")
    assert remove_stale_temps(tmp_path / "checkpoint.pt") == [legacy]
    assert other_host.exists() and not legacy.exists()


def test_progressive_resizing_with_a_dynamic_batch_from_the_command_line(learnable, tmp_path):
    train_shards, _ = learnable
    run = cli("train", "--train", str(train_shards), "--epochs", "2", "--image-size", "64", "--batch-size", "16",
              "--progressive", "--dynamic-batch", "--workers", "1", "--out", str(tmp_path / "run"))
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-2000:]
    steps = json.loads((tmp_path / "run" / "log.json").read_text())["steps"]
    per_epoch = [[s for s in steps if s["epoch"] == epoch] for epoch in (0, 1)]
    # 192 images: epoch 0 at 32 px in batches of 16 x (64 / 32)^2 = 64 (LR x4), epoch 1 at 64 px in batches of 16
    assert [len(epoch) for epoch in per_epoch] == [3, 12]
    assert per_epoch[0][-1]["lr"] > 2 * per_epoch[1][0]["lr"]
