"""Issue 44: 'docs/ gain a page "Packing on a cluster": Ray first, the same plan under SLURM arrays and torchrun,
and how to size items, CPUs and memory'. A user finds --engine ray only in cli.md's flag tables."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _cluster_page() -> str:
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        if "# Packing on a cluster" in text:
            return text
    return ""


def test_docs_have_a_packing_on_a_cluster_page():
    assert _cluster_page(), "no docs page titled 'Packing on a cluster'"


def test_cluster_page_shows_ray_then_slurm_and_sizing():
    text = _cluster_page()
    for needle in ("--engine ray", "--ray-address", "ray start", "--rank", "dataio merge",
                   "--items", "--cpus-per-item", "--memory-per-item"):
        assert needle in text, f"the cluster page does not mention {needle}"


def test_cluster_page_in_mkdocs_nav():
    nav = (DOCS.parent / "mkdocs.yml").read_text()
    assert any(p.name in nav for p in DOCS.glob("*.md") if "# Packing on a cluster" in p.read_text())
