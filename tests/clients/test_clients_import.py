"""The clients' environment itself: the real torchvision Python (transforms v2, tv_tensors, nms), open_clip,
timm and transformers import in a subprocess, and the pytest process does not see torchvision."""

from __future__ import annotations

import importlib.util

from tests.clients.conftest import run_client

PROBE = """
import torch, torchvision, open_clip, timm, transformers, open_clip_train.main
from torchvision import tv_tensors
from torchvision.ops import nms
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float)
print(torchvision.__version__, timm.__version__, nms(boxes, torch.tensor([1.0, 0.9, 0.5]), 0.5).tolist())
"""


def test_the_clients_import_with_torchvisions_python_and_a_cpu_nms(client_env, tmp_path) -> None:
    done = run_client(["-c", PROBE], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    version, timm_version, kept = done.stdout.split(maxsplit=2)
    assert version.startswith("0.28.") and timm_version == "1.0.28"
    assert kept.strip() == "[0, 2]"  # the second box overlaps the first by IoU 0.81: suppressed


def test_the_test_process_itself_has_no_torchvision() -> None:
    assert importlib.util.find_spec("torchvision") is None
