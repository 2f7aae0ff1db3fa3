"""``--tokenizer open_clip:NAME`` takes only open_clip's built-in configs whose tokenizer is local: a name open_clip
would resolve over the network (``hf-hub:``, a config naming a Hub tokenizer, SigLIP's) is refused in one line
before open_clip is asked, so nothing is contacted (the run is offline too: HF_HUB_OFFLINE, no proxy to reach)."""

from __future__ import annotations

import pytest

from dataio.formats.pairs.synthetic_pair_writers import write_img2dataset
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from tests.clients.conftest import run_client
from tests.hostile_helpers import one_line_refusal


@pytest.mark.parametrize(("name", "said"), [
    ("open_clip:hf-hub:laion/CLIP-ViT-B-32-laion2B-s34B-b79K", "not a schema like hf-hub:"),
    ("open_clip:local-dir:.", "not a schema like hf-hub:"),
    ("open_clip:ViT-B-16-SigLIP-256", "would download this model's tokenizer"),
    ("open_clip:No-Such-Model", "not one of open_clip's built-in model configs"),
])
def test_an_open_clip_name_that_is_not_local_is_refused_in_one_line(client_env, tmp_path, name, said):
    """Before: ``open_clip.get_tokenizer`` was given any name, and hf-hub:ORG/REPO made it download a config."""
    folder = tmp_path / "tars"
    write_img2dataset(folder, SyntheticPairsConfig(count=4, samples_per_shard=4, failed_fraction=0.0, seed=3))
    env = {**client_env, "DATAIO_NUM_WORKERS": "1", "HF_HUB_OFFLINE": "1", "HTTPS_PROXY": "http://127.0.0.1:9",
           "HTTP_PROXY": "http://127.0.0.1:9"}
    done = run_client(["-m", "dataio", "index", str(folder), "--tokenizer", name, "--no-progress"], env, tmp_path)
    err = one_line_refusal(done)
    assert done.returncode == 2 and name in err and said in err, err
    assert not (folder / "manifest.json").exists()
