"""Issue 45, read as a user: README and docs/ said nothing of the CPU tiers but one `--cpu-tier` row in cli.md:
not what DATAIO_CPU_TIER is, nor that only the `dataio` command reads it (a script of your own, under torchrun
too, silently runs the CPU's highest), nor `use_tier`, nor that spawned processes start at the CPU's tier;
`python -m dataio.check_install --help` did not name the variable it reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dataio import check_install

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _section(page: str, heading: str) -> str:
    text = (DOCS / page).read_text()
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"docs/{page} has no '## {heading}' section"
    return match[1]


def test_read_page_has_a_cpu_tiers_section_naming_every_tier_and_how_to_choose():
    text = _section("read.md", "CPU tiers")
    for needle in ("`scalar`", "`avx2`", "`avx512`", "`vbmi`", "DATAIO_CPU_TIER", "--cpu-tier", "use_tier",
                   "dataio.use_tier(", "check_install", "same pixels"):
        assert needle in text, f"the CPU tiers section does not mention {needle}"


def test_docs_say_a_script_of_ones_own_does_not_read_the_variable():
    text = " ".join(_section("read.md", "CPU tiers").split())
    assert "does *not* read `DATAIO_CPU_TIER`" in text
    assert "torchrun" in text and "only part of dataio that reads environment variables" in text


def test_docs_say_spawned_processes_start_at_the_cpus_tier():
    text = " ".join(_section("read.md", "CPU tiers").split())
    for needle in ("spawn", "forkserver", "ddp_spawn", "begin at the CPU's highest", "top level",
                   "carries a cap below the CPU's"):
        assert needle in text, f"the CPU tiers section does not mention {needle}"
    assert "CPU tiers](read.md#cpu-tiers)" in (DOCS / "dataloader.md").read_text()


def test_readme_and_install_page_point_at_the_tiers():
    assert "(docs/read.md#cpu-tiers)" in (ROOT / "README.md").read_text()
    assert "(read.md#cpu-tiers)" in (DOCS / "install.md").read_text()


def test_check_install_help_names_the_variable_it_reads(capsys):
    with pytest.raises(SystemExit):
        check_install.main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "DATAIO_CPU_TIER" in shown and "use_tier" in shown
