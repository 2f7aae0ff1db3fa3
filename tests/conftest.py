"""Shared fixtures: tiny generated image folders and their shards (no network, no downloads)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

# One intra-op thread in every process of the suite (torch's OpenMP pool, BLAS), set before they start: two pytest
# workers and the processes their tests start already fill both cores, where a pool of two per process spins
# waiting for a core that is busy. Tests of threading set their own counts.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest
from PIL import Image

from hypothesis import settings

from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images

# A suite started in the background by a script (`make test &`, nohup) inherits SIGINT ignored, and so would
# every process it starts: the Ctrl-C tests then found nothing to stop (5 failed, two after 120 s timeouts).
# Python's own handler for the session: its children start with the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
from dataio.formats.images.synthetic import SyntheticImagesConfig, add_faulty_files, write_image_folder

# Fuzzing campaigns: short in `make test`, long in `make fuzz` (--hypothesis-profile=long).
settings.register_profile("default", max_examples=25, deadline=None)
settings.register_profile("long", max_examples=2000, deadline=None)
settings.load_profile("default")

NUM_COLOURED = 45
COLOUR_STEP = 40


def colour_of(index: int) -> tuple[int, int, int]:
    """A solid colour that survives JPEG and identifies ``index`` (0..NUM_COLOURED-1)."""
    return (20 + COLOUR_STEP * (index % 6), 20 + COLOUR_STEP * (index // 6 % 6), 20 + COLOUR_STEP * (index // 36))


def index_of(pixels: np.ndarray) -> int:
    """Inverse of ``colour_of`` from an (H, W, 3) or (3, H, W) crop."""
    if pixels.shape[0] == 3:
        pixels = pixels.transpose(1, 2, 0)
    r, g, b = (int(round((c - 20) / COLOUR_STEP)) for c in pixels.reshape(-1, 3).mean(0))
    return r + 6 * g + 36 * b


def pytest_collection_modifyitems(config, items) -> None:
    """The files using the Ray head run first, together (one head serves them all, then stops: ``ray_head``), then
    the files holding a test marked ``slow`` (with two workers, a minutes-long test started last runs alone while
    the other worker idles), each file kept whole: its module fixtures are built once."""
    def files(wanted) -> set[str]:
        return {item.nodeid.split("::")[0] for item in items if wanted(item)}

    slow = files(lambda item: item.get_closest_marker("slow"))
    ray = files(lambda item: "ray_head" in getattr(item, "fixturenames", ()))
    RAY_HEAD.files = ray
    items.sort(key=lambda item: (item.nodeid.split("::")[0] not in ray, item.nodeid.split("::")[0] not in slow))


class RayHeadOnDemand:
    """The worker's Ray head, started when a test first asks for its ``address`` and stopped as soon as the next
    test is not in a file using it (``pytest_runtest_teardown``): an idle head's processes would take CPU from every
    later test; a Ray test after that starts one again."""

    def __init__(self) -> None:
        self.head = None
        self.files: set[str] = set()  # the test files using the head (``pytest_collection_modifyitems``)

    @property
    def address(self) -> str:
        if self.head is None:
            from tests.cluster.ray_head import LocalRayHead  # lazy: no Ray tests, no launcher import

            self.head = LocalRayHead()
        return self.head.address

    def close(self) -> list[str]:
        head, self.head = self.head, None
        return head.close() if head is not None else []


RAY_HEAD = RayHeadOnDemand()


@pytest.fixture(scope="session")
def ray_head():
    """One Ray head node (2 CPUs) for the worker's Ray CLI and in-process tests (``--ray-address
    ray_head.address``), running while they run (``RayHeadOnDemand``); killed after, leaving no process."""
    pytest.importorskip("ray", reason="the ray extra is part of the test extra")
    try:
        yield RAY_HEAD
    finally:
        left = RAY_HEAD.close()
        assert left == [], f"Ray processes left after the head's teardown: {left}"


@pytest.hookimpl(trylast=True)  # after the item's own fixtures are torn down (a module's in-process connection)
def pytest_runtest_teardown(item, nextitem) -> None:
    if RAY_HEAD.head is not None and (nextitem is None or nextitem.nodeid.split("::")[0] not in RAY_HEAD.files):
        left = RAY_HEAD.close()
        assert left == [], f"Ray processes left after the head's teardown: {left}"


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """3 classes x 12 photo-like JPEGs, plus the awkward files of real ImageNet."""
    root = tmp_path_factory.mktemp("images")
    write_image_folder(root, SyntheticImagesConfig(num_classes=3, images_per_class=12, seed=3))
    return root, add_faulty_files(root)


@pytest.fixture(scope="session")
def image_shards(image_folder, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shards") / "out"
    convert_images(ConvertImagesConfig(src=image_folder[0], out=out, shard_size="400KB", num_workers=2, progress=False))
    return out


@pytest.fixture(scope="session")
def coloured_folder(tmp_path_factory) -> Path:
    """45 solid-colour JPEGs in 3 class folders (img{i} in c{i % 3}), not converted."""
    root = tmp_path_factory.mktemp("coloured")
    for i in range(NUM_COLOURED):
        folder = root / f"c{i % 3}"
        folder.mkdir(exist_ok=True)
        size = ((300, 200), (200, 300), (256, 256))[i % 3]
        Image.new("RGB", size, colour_of(i)).save(folder / f"img{i:03d}.jpg", quality=95)
    return root


@pytest.fixture(scope="session")
def coloured_shards(coloured_folder, tmp_path_factory) -> Path:
    """The 45 solid-colour images in 3 classes (label = index % 3), several shards."""
    out = tmp_path_factory.mktemp("coloured_shards") / "out"
    convert_images(ConvertImagesConfig(src=coloured_folder, out=out, max_shard_samples=7, num_workers=1,
                                       progress=False))
    return out


from tests.text_fixtures import text_corpus, text_shards  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="session")
def real_photos(tmp_path_factory) -> Path:
    """Photos of real size in ImageNet layout: 2 classes x 6 ImageNet-typical (~110 KB) + 1 camera (~2-4 MB)."""
    root = tmp_path_factory.mktemp("real_photos")
    write_image_folder(root, SyntheticImagesConfig(num_classes=2, images_per_class=6, seed=11, photo_class="imagenet"))
    camera = root / "camera"
    write_image_folder(camera, SyntheticImagesConfig(num_classes=2, images_per_class=1, seed=12, photo_class="camera"))
    for path in sorted(camera.rglob("*.JPEG")):
        path.rename(root / path.parent.name / f"camera_{path.name}")
    for folder in sorted(camera.iterdir()):
        folder.rmdir()
    camera.rmdir()
    return root


@pytest.fixture(scope="session")
def real_photo_shards(real_photos, tmp_path_factory) -> Path:
    """``real_photos`` converted (2 workers, several shards)."""
    out = tmp_path_factory.mktemp("real_photo_shards") / "out"
    convert_images(ConvertImagesConfig(src=real_photos, out=out, shard_size="1MB", num_workers=2, progress=False))
    return out


@pytest.fixture(scope="session")
def coco_folder(tmp_path_factory) -> tuple[Path, Path]:
    """COCO data of real-size photos (640x480, 480x640, 500x375): 10 with 4 shapes each, 2 without
    (``formats.coco.synthetic_coco``); (images folder, instances JSON)."""
    from dataio.formats.coco.synthetic_coco import SyntheticCocoConfig, write_coco_folder

    return write_coco_folder(tmp_path_factory.mktemp("coco"), SyntheticCocoConfig(images=12, empty=2, seed=36))


@pytest.fixture(scope="session")
def coco_shards(coco_folder, tmp_path_factory) -> Path:
    """``coco_folder`` converted (2 workers, 3 shards)."""
    from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco

    out = tmp_path_factory.mktemp("coco_shards") / "out"
    convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=out, max_shard_samples=4,
                                   num_workers=2, progress=False))
    return out


from tests.pair_fixtures import pair_tars, pair_tars_text, real_pair_tars  # noqa: E402,F401  (fixtures)
from tests.hostile_helpers import views_shards  # noqa: E402,F401  (fixture)
# Fixtures read in several folders are imported here only: imported into several modules or conftests, a session
# fixture is one per importer, each built again (a Lightning launch, an open_clip run, a keypoint conversion).
from tests.keypoint_fixtures import keypoint_json, keypoint_shards  # noqa: E402,F401  (fixtures)
from tests.tier_fixtures import restored_tier  # noqa: E402,F401  (fixture)
from tests.loader.predict_fixtures import forty_one, forty_one_documents, lightning_predict  # noqa: E402,F401
from tests.clients.open_clip_runs import open_clip_one_rank, patched  # noqa: E402,F401  (fixtures)
