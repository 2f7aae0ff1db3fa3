"""Issue 46, the tier functions' docs and errors read as a user: docs/dataloader.md still said a spawned worker runs
the CPU's own tier, not a cap set under ``__main__`` (read.md and the code now carry the cap); the tiers' CPU lists
put Cascade Lake (AVX-512) under ``avx2`` and every chip "from Ice Lake on" under ``vbmi`` (Intel's desktop and
laptop chips from Alder Lake on have no AVX-512); the API page rendered three one-line docstrings under their long
module path, naming neither the tier names nor where to call ``use_tier`` nor what spawned processes do, and
``tier_in_use`` claimed to be what the crop-resizes run where plain Pillow resizes instead; ``check_install --help``
named ``dataio.formats.jpeg.cpu_tier.use_tier``; the changelog did not list the new top-level API;
``use_tier("AVX2")`` was refused as ``cpu_tier must be one of ...``, the name of another function."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import dataio
from dataio import check_install
from dataio.formats.errors import ConfigError

from .conftest import ok, run

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def flat(text: str) -> str:
    return " ".join(text.split())


def test_dataloader_page_says_spawned_workers_take_the_cap_the_data_set_carries():
    text = flat((DOCS / "dataloader.md").read_text())
    assert "a spawned worker runs the CPU's own crop-resize tier" not in text
    assert "spawned and forkserver workers resize at the tier of the process that built the loader" in text
    assert "at the crop-resize tier the pickling process was capped at" in text  # the ddp_spawn paragraph


@pytest.mark.parametrize("page", ["README.md", "docs/index.md", "docs/measure.md", "docs/read.md",
                                  "formats/jpeg/cpu_tier.py"])
def test_the_tiers_cpu_lists_name_the_right_chips(page):
    text = flat((ROOT / page).read_text())
    assert not re.search(r"Haswell(-| to )Cascade Lake", text), "Cascade Lake has AVX-512: it runs avx512"
    assert "Ice Lake and later" not in text and "Ice Lake+" not in text, \
        "Intel's chips from Alder Lake on have no AVX-512: they run avx2, not vbmi"
    assert "Alder Lake" in text


def test_the_api_pages_docstrings_are_enough_to_use_the_tier_functions():
    page = (DOCS / "api" / "loaders.md").read_text()
    assert "`dataio.use_tier`" in page and "`dataio.tier_in_use`" in page and "`dataio.cpu_tier`" in page
    use = flat(inspect.getdoc(dataio.use_tier)).replace("``", "")
    for needle in ('"scalar", "avx2", "avx512" or "vbmi"', "in lower case", "top level", "before any loader runs",
                   "DATAIO_CPU_TIER", "spawn", "carries", "same pixels", 'use_tier("vbmi") on an AVX2-only CPU'):
        assert needle in use, needle
    assert "plain Pillow" in inspect.getdoc(dataio.tier_in_use)


def test_tier_in_use_names_a_tier_where_plain_pillow_resizes_as_its_docstring_now_says(tmp_path):
    """Where PIL resizes (plain Pillow: ``RESIZE_IN_C`` false, as check_install reports) ``tier_in_use`` still names
    the extension's tier; the docstring said it is what the crop-resizes run."""
    script = ("import dataio; from dataio.images import turbo_decode; from dataio import check_install\n"
              "turbo_decode.RESIZE_IN_C = False  # what a plain Pillow install finds at import\n"
              "print('use_tier', dataio.use_tier('avx2'), 'in use', dataio.tier_in_use())\n"
              "check_install.main([])\n")
    done = ok(run(["-c", script], tmp_path))
    out = done.stdout + done.stderr
    assert "crop-resize: PIL's" in out and re.search(r"use_tier \w+ in use \w+", out), out
    doc = flat(inspect.getdoc(dataio.tier_in_use))
    assert "no tier runs" in doc and "check_install" in doc


def test_check_install_help_names_the_public_use_tier(capsys):
    with pytest.raises(SystemExit):
        check_install.main(["--help"])
    shown = flat(capsys.readouterr().out)
    assert "dataio.use_tier(name)" in shown and "dataio.formats.jpeg.cpu_tier.use_tier" not in shown


def test_the_changelog_lists_the_top_level_tier_api_and_the_carried_cap():
    newest = (ROOT / "CHANGELOG.md").read_text().split("## [Unreleased]", 1)[1].split("\n## Issue 44", 1)[0]
    assert "`dataio.use_tier(name)`" in newest and "carries a cap below the CPU's" in flat(newest)


def test_a_bad_tier_name_is_refused_naming_use_tier_and_its_argument():
    """``dataio.use_tier("AVX2")`` said ``cpu_tier must be one of ...``: the name of another function, not of the
    argument given."""
    with pytest.raises(ConfigError) as raised:
        dataio.use_tier("AVX2")
    assert str(raised.value) == ("dataio.use_tier: name must be one of scalar, avx2, avx512, vbmi (lower case), "
                                 "got 'AVX2'")
