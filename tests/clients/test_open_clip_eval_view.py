"""A pair folder's evaluation batch is open_clip's ``image_transform(224, is_train=False)`` (bicubic resize of the
shorter side, centre crop, OpenAI's mean/std), run by open_clip itself on the same photos in a client subprocess:
the mean absolute difference in normalised units is under 0.05 (the resize kernels differ: dataio's antialiased
bilinear, torchvision's bicubic); ImageNet's crop ratio 0.875, the default before, is ~10x further."""

from __future__ import annotations

import json
import shutil

from tests.clients.conftest import run_client
from tests.pair_fixtures import indexed

SCRIPT = """
import json, sys, torch, dataio
from open_clip.transform import image_transform
from open_clip.constants import OPENAI_DATASET_MEAN as MEAN, OPENAI_DATASET_STD as STD
folder = sys.argv[1]
reference = image_transform(224, is_train=False)
whole = dataio.ShardDataset(folder, to_pil=True)
out = {}
for name, options in (("default", {}), ("imagenet_crop", {"val_crop_ratio": 0.875})):
    loader = dataio.PairLoader(folder, batch_size=4, image_size=224, train=False, normalize=True, mean=MEAN, std=STD,
                               channels_last=False, **options)
    diffs = []
    for batch in loader:
        for row, sample in enumerate(batch["sample_ids"].tolist()):
            diffs.append(float((batch["image"][row] - reference(whole[sample]["image"])).abs().mean()))
    out[name] = sum(diffs) / len(diffs)
print(json.dumps(out))
"""


def test_the_pair_eval_view_matches_open_clips_image_transform(real_pair_tars, client_env, tmp_path):
    folder = tmp_path / "tars"
    shutil.copytree(real_pair_tars, folder)
    indexed(folder, None)
    done = run_client(["-c", SCRIPT, str(folder)], client_env, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    diff = json.loads(done.stdout.strip().splitlines()[-1])
    assert diff["default"] < 0.05, diff
    assert diff["imagenet_crop"] > 5 * diff["default"], diff
