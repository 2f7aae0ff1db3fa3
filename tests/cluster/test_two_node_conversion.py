"""Issue 44's two-node checks, all in ONE test: every pytest worker that asks for ``ray_cluster`` starts its own
two-node cluster (about 20 s and two Ray nodes on a 2-core machine), so exactly one test may ask for it.

The steps: the harness itself (a task on each node, a store both nodes share, the processes it started), each
kind converted from S3 to S3 with ``--engine ray`` and compared with a one-process conversion, the driver killed
mid-job and run again (it finishes from the parts already written), and last the second node killed while it runs
an item (the job finishes with every sample once on the head alone).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dataio.formats.coco.coco_convert import ConvertCocoConfig, convert_coco
from dataio.formats.images.image_convert import ConvertImagesConfig, convert_images
from dataio.formats.pairs.synthetic_pair_writers import write_caption_folder
from dataio.formats.pairs.synthetic_pairs import SyntheticPairsConfig
from dataio.formats.text.text_convert import ConvertTextConfig, convert_text
from dataio.formats.text.tokenizer_setup import TokenizerConfig
from tests.cluster.drivers import kill_driver_when, run_driver
from tests.cluster.ray_nodes import LocalRayCluster, group_members, ps_lines

ray = pytest.importorskip("ray", reason="the ray extra is part of the test extra")
from tests.plan.test_plan_on_ray import _token_rows, same_dataset  # noqa: E402

pytestmark = pytest.mark.slow  # minutes on 2 cores (two real nodes); `make test` runs it

# Drivers of the harness checks run as subprocesses with the cluster's environment, as `dataio convert` does.
HARNESS = """
import json, sys, ray
ray.init(address=sys.argv[1], log_to_driver=False)
options, url = json.loads(sys.argv[2]), sys.argv[3]
@ray.remote(num_cpus=1)
def node_id():
    return ray.get_runtime_context().get_node_id()
@ray.remote(num_cpus=1)
def write():
    import s3fs
    with s3fs.S3FileSystem(**options).open(url, "wb") as f:
        f.write(ray.get_runtime_context().get_node_id().encode())
    return ray.get_runtime_context().get_node_id()
@ray.remote(num_cpus=1)
def read():
    import s3fs
    return s3fs.S3FileSystem(**options).cat_file(url).decode(), ray.get_runtime_context().get_node_id()
head = ray.get(node_id.options(resources={"node:__internal_head__": 0.01}).remote())
second = ray.get(node_id.options(resources={"second_node": 1}).remote())
writer = ray.get(write.options(resources={"second_node": 1}).remote())
text, reader = ray.get(read.options(resources={"node:__internal_head__": 0.01}).remote())
print(json.dumps({"head": head, "second": second, "writer": writer, "text": text, "reader": reader}))
"""
ENGINE = ("--engine", "ray", "--item-retries", "3")
ITEM_TASK = "ray::item_task"  # a Ray worker's process title while it runs an item


def _script(cluster: LocalRayCluster, script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), cluster.address, *args], env=cluster.env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def _items_on(node_dir: Path) -> bool:
    """Whether a worker of the node whose temp dir is ``node_dir`` ran an item: Ray writes ``:task_name:NAME`` into
    a worker's log when a task starts (its log monitor's marker)."""
    return any(":task_name:item_task" in log.read_text(errors="replace")
               for log in node_dir.glob("session_*/logs/worker-*"))


def _running_item_on(node_dir: Path) -> bool:
    """Whether a worker of the node whose temp dir is ``node_dir`` runs an item now: a child of that node's raylet
    (workers have process groups of their own; the raylet's command line names the node's temp dir)."""
    ps = subprocess.run(["ps", "-eww", "-o", "pid=,ppid=,args="], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in ps.splitlines() if len(line.split(None, 2)) == 3]
    raylets = {pid for pid, _, args in rows if "raylet" in args.split()[0] and str(node_dir) in args}
    return any(parent in raylets and args.startswith(ITEM_TASK) for _, parent, args in rows)


class Conversions:
    """``dataio convert KIND ... --engine ray`` from S3 to a fresh S3 prefix; the result downloaded."""

    def __init__(self, cluster: LocalRayCluster, s3, work: Path) -> None:
        self.cluster, self.s3, self.work = cluster, s3, work

    def args(self, kind: str, sources: list[str], out: str, items: int, *extra: str) -> list[str]:
        staging = self.work / f"staging-{time.monotonic_ns()}"  # each run's own: no staged part shared by runs
        return ["convert", kind, *sources, out, *ENGINE, "--ray-address", self.cluster.address, "--items", str(items),
                "--staging", str(staging), *self.s3.cli_options(), *extra]

    def run(self, args: list[str], what: str) -> subprocess.CompletedProcess:
        done = run_driver(args, self.cluster.env, self.work, timeout=420)
        assert done.returncode == 0, f"{what}: exit {done.returncode}: {done.stderr[-3000:]}"
        return done

    def fetched(self, out: str, name: str) -> Path:
        return self.s3.download(out, self.work / f"fetched-{name}")


def test_two_nodes_convert_every_kind_from_s3_survive_a_lost_node_and_a_killed_driver(
        ray_cluster, cluster_s3, image_folder, coco_folder, text_corpus, tmp_path):
    cluster = ray_cluster
    # -- the harness: a task on each node, the processes it started, a file written on node 2 read on the head
    shared = cluster_s3.new_prefix("shared") + "/from-second.txt"
    seen = json.loads(_script(cluster, HARNESS, json.dumps(cluster_s3.options()), shared))
    assert seen["head"] != seen["second"] and cluster.nodes_alive() == 2, "harness: a task on each of the two nodes"
    assert len(cluster.processes()) >= 4, "harness: launchers, GCS and raylets at least"
    assert any(str(cluster.root) in fields[3] for fields in ps_lines()), "harness: the nodes' temp dir in ps"
    assert seen["writer"] == seen["second"] and seen["reader"] == seen["head"] and seen["text"] == seen["writer"], \
        f"harness: S3 across nodes {seen}"

    # -- step 1: each kind from S3 to S3 on the two nodes equals the one-process conversion
    runs = Conversions(cluster, cluster_s3, tmp_path)
    images_url = cluster_s3.put_folder(image_folder[0], "images")
    one_images = tmp_path / "one-images"
    convert_images(ConvertImagesConfig(src=image_folder[0], out=one_images, num_workers=1, progress=False))
    out = cluster_s3.new_prefix("images-out")
    done = runs.run(runs.args("images", [images_url], out, 3), "images")
    same_dataset(one_images, runs.fetched(out, "images"))
    assert "rejected " in done.stderr, f"images: the rejected files are said: {done.stderr[-2000:]}"

    captions = tmp_path / "captions"
    write_caption_folder(captions, SyntheticPairsConfig(count=12, seed=5))
    one_pairs = tmp_path / "one-pairs"
    convert_images(ConvertImagesConfig(src=captions, out=one_pairs, captions=True, num_workers=1, progress=False))
    out = cluster_s3.new_prefix("pairs-out")
    runs.run(runs.args("images", [cluster_s3.put_folder(captions, "captions")], out, 3, "--captions"), "pairs")
    same_dataset(one_pairs, runs.fetched(out, "pairs"))

    one_coco = tmp_path / "one-coco"
    convert_coco(ConvertCocoConfig(images=coco_folder[0], annotations=coco_folder[1], out=one_coco, num_workers=1,
                                   progress=False))
    annotations = cluster_s3.put_folder(coco_folder[1].parent, "ann") + "/" + coco_folder[1].name
    coco_images = cluster_s3.put_folder(coco_folder[0], "coco")
    out = cluster_s3.new_prefix("coco-out")
    runs.run(runs.args("coco", [coco_images, annotations], out, 3), "coco")
    same_dataset(one_coco, runs.fetched(out, "coco"))

    one_text = tmp_path / "one-text"
    convert_text(ConvertTextConfig(sources=(text_corpus,), out=one_text, max_length=96, shard_tokens=4000,
                                   tokenizer=TokenizerConfig(train="bpe", vocab_size=600), progress=False))
    text_url = cluster_s3.put_folder(text_corpus.parent, "text") + "/" + text_corpus.name
    out = cluster_s3.new_prefix("text-out")
    runs.run(runs.args("text", [text_url], out, 3, "--train-tokenizer", "bpe", "--vocab-size", "600",
                       "--max-length", "96", "--shard-tokens", "4000"), "text")
    fetched = runs.fetched(out, "text")
    assert _token_rows(one_text) == _token_rows(fetched), "text: the token rows of one process"
    assert (one_text / "tokenizer.json").read_bytes() == (fetched / "tokenizer.json").read_bytes(), "text: tokenizer"
    assert _items_on(cluster.root / "h") and _items_on(cluster.root / f"s{cluster.restarts}"), \
        "step 1: items ran on both nodes"

    # -- step 2: the driver killed mid-job; the same command again finishes from the parts already written
    out = cluster_s3.new_prefix("killed-driver")
    args = runs.args("images", [images_url], out, 8)
    kill_driver_when(args, cluster.env, tmp_path, lambda: cluster_s3.parts_with_manifest(out) >= 1, timeout=300)
    assert "manifest.json" not in cluster_s3.list(out), "step 2: the driver was killed before its merge"
    again = runs.run(args, "step 2 rerun")
    assert "already done" in again.stderr, f"step 2: finished parts are skipped: {again.stderr[-3000:]}"
    same_dataset(one_images, runs.fetched(out, "killed-driver"))

    # -- step 3, last (the cluster keeps one node after it): the second node killed while it runs an item; the job
    # still finishes with every sample once
    killed = cluster.second
    assert killed is not None
    out = cluster_s3.new_prefix("lost-node")
    args = runs.args("images", [images_url], out, 8)
    driver = subprocess.Popen([sys.executable, "-m", "dataio", *args], env=cluster.env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while cluster_s3.parts_with_manifest(out) < 1:  # the first part is complete on S3
            assert driver.poll() is None, f"step 3: the driver ended before a part: {driver.communicate()}"
            assert time.monotonic() < deadline, "step 3: no part within 300 s"
            time.sleep(0.2)  # each poll lists S3: a tighter loop takes CPU from the items
        while not _running_item_on(killed.temp_dir):  # then node 2 runs an item: the kill hits it
            assert driver.poll() is None, f"step 3: the driver ended before node 2 ran an item: {driver.communicate()}"
            assert time.monotonic() < deadline, "step 3: node 2 never ran an item after the first part"
            time.sleep(0.1)  # each poll runs ps; an item runs for seconds
        cluster.kill_second_node()  # waits until the GCS counts one live node
        stdout, stderr = driver.communicate(timeout=420)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 0, f"step 3: exit {driver.returncode}: {stderr[-3000:]}"
    assert "attempt 1 failed" in stderr, f"step 3: the lost attempt is said: {stderr[-3000:]}"
    assert group_members(killed.launcher.pid) == [] and cluster.nodes_alive() == 1, "step 3: node 2 is gone"
    lost = runs.fetched(out, "lost-node")
    same_dataset(one_images, lost)
    rejected = (lost / "rejected.jsonl").read_text().splitlines()
    assert rejected and len(rejected) == len(set(rejected)), "step 3: each rejected file listed once"
