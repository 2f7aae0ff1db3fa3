"""The engine flags refused where they do not apply, in one line and before anything is read or started."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataio.cli import main


def test_ray_with_ranks_is_one_usage_line_from_the_cli(image_folder, tmp_path):
    run = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(image_folder[0]),
                          str(tmp_path / "out"), "--engine", "ray", "--rank", "0", "--world-size", "2"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert "--rank/--world-size are for the local engine" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("flags, said", [
    (["--items", "4"], "--items is for --engine ray"),
    (["--ray-address", "127.0.0.1:1"], "--ray-address is for --engine ray"),
    (["--engine", "ray", "--item-retries", "-1"], "--item-retries must be >= 0"),
])
def test_engine_flags_out_of_place_are_one_usage_line(flags, said, image_folder, tmp_path, capsys):
    assert main(["convert", "images", str(image_folder[0]), str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
