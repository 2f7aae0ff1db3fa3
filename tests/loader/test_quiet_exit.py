"""Nothing is printed at interpreter exit, whether a loader was closed, left open, broken out of or interrupted.

Each state runs as a user's script (quiet_exit_script.py) in its own
interpreter: exit code and the whole of stderr are checked. An interrupt
(SIGINT mid-epoch) prints Python's KeyboardInterrupt traceback from the
script's own line, and nothing after it (no ``Exception ignored in``, no
thread's traceback).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().with_name("quiet_exit_script.py")
ROOT = Path(__file__).resolve().parents[2]
KINDS = ("image", "dropin", "text")


def _start(sources: dict, mode: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), json.dumps(sources), mode], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def check_quiet_exit(images: str | Path, text: str | Path, storage_options: dict | None = None) -> None:
    """Run every state against these sources (all at once) and check what each process printed."""
    sources = {"images": str(images), "text": str(text), "storage_options": storage_options}
    states = _start(sources, "states")
    interrupted = {kind: _start(sources, f"interrupt:{kind}") for kind in KINDS}
    for kind, process in interrupted.items():
        line = process.stdout.readline()
        assert line == "started\n", (kind, line, process.stderr.read() if process.poll() is not None else "")
        time.sleep(0.3)  # mid-epoch, batches in flight
        process.send_signal(signal.SIGINT)
    out, err = states.communicate(timeout=300)
    assert (states.returncode, out, err) == (0, "end\n", "")
    for kind, process in interrupted.items():
        _, err = process.communicate(timeout=120)
        lines = err.splitlines()
        assert process.returncode == -signal.SIGINT, (kind, process.returncode, err[-2000:])
        assert lines[0] == "Traceback (most recent call last):" and lines[1].startswith(f'  File "{SCRIPT}"'), \
            (kind, err[-2000:])
        assert lines[-1] == "KeyboardInterrupt" and err.count("Traceback") == 1, (kind, err[-2000:])
        assert "Exception ignored" not in err and "Exception in thread" not in err, (kind, err[-2000:])


def test_nothing_printed_at_exit_with_local_shards(real_photo_shards, text_shards):
    check_quiet_exit(real_photo_shards, text_shards)
