"""Progress bars only on a terminal; in a log file, plain lines with the rate (issue 24 §4)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import termios
import subprocess
import sys

from dataio.formats.progress import LineProgress, progress


def test_a_conversion_into_a_log_file_writes_lines_not_bar_frames(image_folder, tmp_path):
    log = tmp_path / "job.log"
    with open(log, "w") as stderr:  # as a SLURM job's output file
        done = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(image_folder[0]),
                               str(tmp_path / "out"), "--workers", "1"], stdout=subprocess.PIPE, stderr=stderr,
                              text=True, timeout=300)
    assert done.returncode == 0
    text = log.read_text()
    assert "\r" not in text
    (last,) = [line for line in text.splitlines() if line.startswith("convert: ")]  # a short run: the end line
    assert "(100%)" in last and "img/s" in last


def test_on_a_terminal_it_is_tqdm(image_folder, tmp_path):
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    try:
        done = subprocess.run([sys.executable, "-m", "dataio", "convert", "images", str(image_folder[0]),
                               str(tmp_path / "out"), "--workers", "1"], stdout=subprocess.PIPE, stderr=child,
                              timeout=300)
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if child >= 0:
            os.close(child)
        os.close(main)
    assert done.returncode == 0
    output = b"".join(chunks)
    assert b"\r" in output and b"img" in output  # tqdm's bar, redrawn in place


def test_line_progress_writes_every_interval_with_eta(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("dataio.formats.progress.time.monotonic", lambda: clock[0])
    out = io.StringIO()
    bar = LineProgress(total=1000, initial=0, unit="img", desc="convert", stream=out, interval=30)
    for _ in range(10):
        clock[0] += 10
        bar.update(50)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "convert: 150/1,000 img (15%), 5 img/s, 170s left"
    assert len(lines) == 4 and lines[-1] == "convert: 500/1,000 img (50%), 5 img/s, 100s"


def test_disabled_progress_prints_nothing(capsys):
    bar = progress(total=3, unit="img", desc="x", enabled=False)
    bar.update(3)
    bar.close()
    assert capsys.readouterr().err == ""
