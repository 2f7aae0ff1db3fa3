"""torchvision's Python parts on the CPU torch of the test machine (tests/clients only).

PyPI's torchvision wheel is CUDA's: its compiled ops need libtorch_cuda, so ``import torchvision`` fails on a CPU
torch at ``register_fake("torchvision::nms")``. Defining the two schemas it registers against, with a CPU ``nms``
written from its definition (greedy, by descending score, IoU strictly above the threshold suppresses), lets the real
transforms v2, tv_tensors and detection models import; ``roi_align`` takes torchvision's own Python path. Only client
tests put this folder on PYTHONPATH, so the library's tests see no torchvision, as users without it.
"""

import torch

_LIBRARY = torch.library.Library("torchvision", "DEF")
_LIBRARY.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_LIBRARY.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")


def _nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    suppressed = torch.zeros(len(dets), dtype=torch.bool)
    keep = []
    for i in scores.argsort(descending=True, stable=True).tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        inter = ((torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
                 * (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0))
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


_LIBRARY.impl("nms", _nms, "CPU")

import torchvision.ops.boxes as _boxes  # noqa: E402  (after the schemas it needs)

_boxes._assert_has_ops = lambda: None  # nms has its kernel above

import sys  # noqa: E402

import torchvision.ops  # noqa: E402,F401

_roi_align = sys.modules["torchvision.ops.roi_align"]  # the module: torchvision.ops.roi_align is also its function

# torchvision wraps its Python roi_align in torch.compile at the first call: a minute and more of C++ compilation on
# a CPU for every subprocess. The eager function (``__wrapped__``) gives the same values on the tiny inputs of tests.
_roi_align._roi_align = _roi_align._roi_align.__wrapped__
