"""torchvision v2 transforms over ShardDataset detection items (issue 43), in the client's own code: per-object
fields (iscrowd, keypoints) move and are filtered with the boxes, and layout="torchvision" gives (image, target)."""

from __future__ import annotations

import textwrap

from tests.clients.conftest import client_env, run_client  # noqa: F401  (fixture)

SCRIPT = '''
    import pickle, sys
    from collections import defaultdict
    import torch
    import dataio
    from torchvision import tv_tensors
    from torchvision.transforms import v2 as T
    from torchvision.transforms.v2.functional._utils import _KERNEL_REGISTRY
    from dataio.detection.tv_per_object import ObjectKeyPoints, PerObject

    # every functional torchvision registers a Mask kernel for has one of ours: none treats a field as pixels
    missing = [f.__name__ for f, kernels in _KERNEL_REGISTRY.items() if tv_tensors.Mask in kernels
               and PerObject not in kernels]
    print("missing kernels", missing)

    dataset = dataio.ShardDataset(sys.argv[1])
    item = dataset[0]
    assert type(item["keypoints"]) is ObjectKeyPoints and type(item["iscrowd"]) is PerObject, item
    height, width = item["image"].shape[-2:]
    resized = T.Resize((height // 2, width // 2))(item)
    labelled = item["keypoints"][..., 2] > 0
    half = item["keypoints"][..., :2].clone()
    half[..., 0] *= (width // 2) / width
    half[..., 1] *= (height // 2) / height
    print("resize moves", torch.allclose(resized["keypoints"][..., :2][labelled], half[labelled], atol=1e-4),
          tuple(resized["keypoints"].canvas_size) == (height // 2, width // 2))
    again = pickle.loads(pickle.dumps(item["keypoints"]))  # DataLoader workers send items pickled
    print("pickled", type(again).__name__, again.canvas_size == item["keypoints"].canvas_size)

    fill = defaultdict(lambda: 0, {tv_tensors.Image: (123.0, 117.0, 104.0)})
    ssd = T.Compose([T.RandomZoomOut(fill=fill, p=1.0), T.RandomIoUCrop(), T.RandomHorizontalFlip(p=1.0),
                     T.SanitizeBoundingBoxes(), T.ToPureTensor()])
    torch.manual_seed(0)
    aligned, dropped = True, 0
    for i in range(len(dataset)):
        out = ssd(dataset[i])
        n = len(out["boxes"])
        dropped += len(dataset[i]["boxes"]) - n
        aligned &= len(out["labels"]) == len(out["iscrowd"]) == len(out["keypoints"]) == n
        points = out["keypoints"]
        seen = points[..., 2] > 0
        h, w = out["image"].shape[-2:]
        aligned &= bool((points[seen][:, 0] <= w).all()) and bool((points[~seen] == 0).all())
    print("ssd aligned", aligned, "dropped", dropped > 0)

    pairs = dataio.ShardDataset(sys.argv[1], targets=dataio.DetectionConfig(layout="torchvision"),
                                transform=T.RandomHorizontalFlip(p=1.0))
    image, target = pairs[0]
    print("pair flip", torch.allclose(target["keypoints"][labelled][:, 0], width - item["keypoints"][labelled][:, 0]),
          torch.equal(target["labels"], item["labels"] + 1))
'''


def test_v2_moves_and_filters_per_object_fields_with_the_boxes(keypoint_shards, client_env, tmp_path) -> None:
    path = tmp_path / "per_object.py"
    path.write_text(textwrap.dedent(SCRIPT))
    done = run_client([str(path), str(keypoint_shards)], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "missing kernels []" in done.stdout, done.stdout
    assert "resize moves True True" in done.stdout and "pickled ObjectKeyPoints True" in done.stdout, done.stdout
    assert "ssd aligned True dropped True" in done.stdout and "pair flip True True" in done.stdout, done.stdout
