"""A pass under a gloo process group leaves a pause at exit for gloo's threads (dataio/pipeline/exit_close.py).

The race itself (torch 2.13: a gloo thread drops its last all-reduce, holding
a Python object, while the interpreter finalizes, and the rank aborts) shows in
about 1 run in 20 of test_dlojz_script's torchrun case; here the mechanism is
checked, in a fresh interpreter: no pause without a group, the pause once a
pass began under one, even after the group was destroyed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
import torch.distributed as dist
import dataio
from dataio.pipeline import exit_close

def one_pass():
    loader = dataio.DataLoader(sys.argv[1], batch_size=8, image_size=16, normalize=False)
    return sum(len(labels) for _, labels in loader)

facts = {"samples": one_pass(), "seen_without_group": exit_close._gloo_seen}
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
facts["samples_in_group"] = one_pass()
dist.destroy_process_group()
facts["seen_with_group"] = exit_close._gloo_seen
pauses = []
exit_close.time.sleep = pauses.append
exit_close._close_live()
facts["pauses"] = pauses
print(json.dumps(facts))
"""


def test_a_pass_under_gloo_leaves_a_pause_at_exit_and_none_without(coloured_shards, tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(coloured_shards), str(tmp_path / "rendezvous")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]
    facts = json.loads(done.stdout)
    assert facts["samples"] == facts["samples_in_group"] == 45
    assert facts["seen_without_group"] is False and facts["seen_with_group"] is True
    assert facts["pauses"] == [0.2]


CTRL_C_SCRIPT = """
import atexit, sys
import torch.distributed as dist
import dataio
from dataio.pipeline import exit_close

exit_close.GLOO_GRACE_S = 30.0  # long enough for the test's Ctrl-C to land inside the pause
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
loader = dataio.DataLoader(sys.argv[1], batch_size=8, image_size=16, normalize=False)
print(sum(len(labels) for _, labels in loader), flush=True)
dist.destroy_process_group()
atexit.register(print, "exiting", flush=True)  # registered after dataio's hook, so it runs just before the pause
"""


# "": Python's own Ctrl-C; the handler: a script's 'Ctrl-C: sys.exit(130)', whose SystemExit in the pause printed
# 'Exception ignored in atexit callback ... SystemExit: 130'.
@pytest.mark.parametrize("prelude", ["", "import signal, sys\nsignal.signal(signal.SIGINT, lambda *_: sys.exit(130))\n"],
                         ids=["ctrl-c", "handler-sys-exit"])
def test_ctrl_c_during_the_pause_ends_the_process_without_a_traceback(prelude, coloured_shards, tmp_path):
    process = subprocess.Popen([sys.executable, "-c", prelude + CTRL_C_SCRIPT, str(coloured_shards),
                                str(tmp_path / "rdzv")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert process.stdout.readline() == "45\n" and process.stdout.readline() == "exiting\n"
    time.sleep(0.5)  # the interpreter is in the 30 s pause (1 s after '45' could land before it on a loaded machine)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=20)
    assert (process.returncode, err) == (0, "")


BACKENDS_SCRIPT = """
import json, sys
import torch.distributed as dist
import dataio
from dataio.pipeline import exit_close

backend = None if sys.argv[3] == "default" else sys.argv[3]
dist.init_process_group(backend, init_method="file://" + sys.argv[2], rank=0, world_size=1)
loader = dataio.DataLoader(sys.argv[1], batch_size=8, image_size=16, normalize=False)
samples = sum(len(labels) for _, labels in loader)
dist.destroy_process_group()
print(json.dumps({"samples": samples, "seen": exit_close._gloo_seen}))
"""


def test_a_group_whose_cpu_backend_is_gloo_counts_however_it_was_named(coloured_shards, tmp_path):
    # init_process_group() with no backend (torchrun's usual form) is 'undefined' with a gloo CPU backend,
    # and 'cpu:gloo' (or 'cpu:gloo,cuda:nccl' on GPU) is gloo too: neither left the pause before.
    for backend in ("default", "cpu:gloo"):
        done = subprocess.run([sys.executable, "-c", BACKENDS_SCRIPT, str(coloured_shards),
                               str(tmp_path / f"rdzv-{backend}"), backend],
                              capture_output=True, text=True, timeout=120, cwd=ROOT,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]
        assert json.loads(done.stdout) == {"samples": 45, "seen": True}, backend


DAEMON_SCRIPT = """
import sys, threading, time
import torch.distributed as dist
import dataio
from dataio.pipeline import exit_close

exit_close.GLOO_GRACE_S = 1.0  # a wider pause than 0.2 s, so the thread is surely still reading in it
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
loader = dataio.DataLoader(sys.argv[1], batch_size=8, image_size=16, normalize=False)
passes = []

def read_forever():
    while True:
        for _ in loader:
            time.sleep(0.01)
        passes.append(1)

threading.Thread(target=read_forever, daemon=True).start()
while not passes:
    time.sleep(0.05)
print("read", flush=True)
"""


def test_a_daemon_thread_still_reading_at_exit_ends_quietly(coloured_shards, tmp_path):
    # The interpreter's exit stops the decode pools; the daemon thread, running on through the pause, submitted
    # to one and printed 'RuntimeError: cannot schedule new futures after shutdown' (every run under gloo).
    done = subprocess.run([sys.executable, "-c", DAEMON_SCRIPT, str(coloured_shards), str(tmp_path / "rdzv")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "read\n", ""), done.stderr[-3000:]


GROUP_AFTER_PASS_SCRIPT = """
import json, sys
import torch.distributed as dist
import dataio
from dataio.pipeline import exit_close

loader = dataio.DataLoader(sys.argv[1], batch_size=8, image_size=16, normalize=False)
batches = iter(loader)  # begun before the group, read under it
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
samples = sum(len(labels) for _, labels in batches)
pauses = []
exit_close.time.sleep = pauses.append
exit_close._close_live()
print(json.dumps({"samples": samples, "pauses": pauses}))
"""


def test_a_group_started_after_the_pass_began_and_still_up_at_exit_gets_the_pause(coloured_shards, tmp_path):
    done = subprocess.run([sys.executable, "-c", GROUP_AFTER_PASS_SCRIPT, str(coloured_shards), str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]
    assert json.loads(done.stdout) == {"samples": 45, "pauses": [0.2]}
