"""The documentation: the site builds strictly and offline, the CLI reference is the parser's, every flag has
help with its default, the quickstart runs as written, and every public name has an API entry."""

from __future__ import annotations

import argparse
import html
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dataio
from dataio import cli_reference
from dataio.cli import _parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Any fetch from the network during a build fails at once: the proxies point at a closed port.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "NO_PROXY": "", "no_proxy": ""}


def _options() -> list[tuple[str, argparse.ArgumentParser, argparse.Action]]:
    """(command, its parser, action) for every argument of every command, hidden ones left out."""
    found = []
    for parser, _ in cli_reference.walk(_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
                continue
            found.append((parser.prog, parser, action))
    return found


def test_cli_reference_is_the_parsers():
    page = (DOCS / "cli.md").read_text()
    assert page == cli_reference.render(), (
        f"docs/cli.md is stale: run `{cli_reference.COMMAND}` from the repository root and commit docs/cli.md")
    for parser, _ in cli_reference.walk(_parser()):  # every command has its section
        assert f"## `{parser.prog}`" in page


def test_every_option_has_help_with_its_default():
    options = _options()
    assert len(options) > 100
    missing = [f"{prog} {action.option_strings or action.dest}" for prog, _, action in options if not action.help]
    assert not missing, f"options without help text: {missing}"
    silent = []
    for prog, parser, action in options:
        takes_value = action.nargs != 0 and not isinstance(action, argparse._VersionAction)
        if action.option_strings and takes_value and not action.required:
            shown = parser._get_formatter()._expand_help(action)  # what --help prints
            if "default" not in shown.lower():
                silent.append(f"{prog} {action.option_strings[0]}: {shown!r}")
    assert not silent, f"options whose help does not give the default: {silent}"


def test_help_prints_defaults(capsys):
    with pytest.raises(SystemExit) as stop:
        _parser().parse_args(["convert", "images", "--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "bytes per shard, e.g. 256MB (default: 256MB)" in text
    assert "--overwrite delete what OUT holds" in text and "(default: False)" not in text  # flags are off, not False
    with pytest.raises(SystemExit):
        _parser().parse_args(["synth", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--photo-class {small,imagenet,camera}" in text and "--per-class PER_CLASS images per class (default: 200)" in text


def test_version_is_the_installed_one():
    result = subprocess.run([sys.executable, "-m", "dataio", "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stderr == ""
    distribution = importlib.metadata.packages_distributions()["dataio"][0]  # torch-dataio
    assert result.stdout == f"dataio {importlib.metadata.version(distribution)}\n" == f"dataio {dataio.__version__}\n"


def test_public_names_have_an_api_entry():
    api = "\n".join(page.read_text() for page in (DOCS / "api").glob("*.md"))
    absent = [f"{module}.{name}" for name, module in dataio._LAZY.items() if f"::: {module}.{name}\n" not in api]
    assert not absent, f"public names missing from docs/api/*.md: {absent}"


def test_site_builds_strict_and_offline(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                             "-d", str(site)], cwd=ROOT, env=dict(os.environ, **OFFLINE), capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WARNING" not in result.stderr and "ERROR" not in result.stderr, result.stderr[-3000:]
    nav = re.findall(r":\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.M)
    assert len(nav) >= 20
    for page in nav:  # every page of the nav became a page of the site
        assert (site / page.removesuffix(".md").removesuffix("index") / "index.html").is_file(), page
    api = _text(site / "api" / "loaders" / "index.html")
    assert "Iterate (images, labels) batches over an image shard folder" in api  # ImageLoader's docstring
    assert "batch_size: int = 256" in api  # ImageLoaderConfig's fields with their defaults
    cli = _text(site / "cli" / "index.html")
    assert "dataio synth" in cli and "--photo-class {small,imagenet,camera}" in cli
    assert "Keep a Changelog" in _text(site / "changelog" / "index.html")  # CHANGELOG.md itself


def _text(page: Path) -> str:
    """The words of an HTML page, tags and entities gone, spaces collapsed."""
    words = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<script.*?</script>", "", page.read_text(), flags=re.S)))
    return " ".join(words.split())


def _blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), flags=re.S | re.M)


def test_quickstart_runs_as_written(tmp_path):
    """The quickstart's shell and Python blocks, in order, in a fresh folder, as a user pastes them."""
    page = DOCS / "quickstart.md"
    shell, python = _blocks(page, "sh"), _blocks(page, "python")
    assert len(shell) == len(python) == 2
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    outputs = []
    for commands, script in zip(shell, python, strict=True):
        for argv in ([ "bash", "-e", "-c", commands], [sys.executable, "-c", script]):
            result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, result.stderr[-3000:]
            assert "Traceback" not in result.stderr and "Exception" not in result.stderr, result.stderr[-3000:]
            outputs.append(result.stdout)
    assert "wrote 4 x 25 images" in outputs[0] and "packed 100 images" in outputs[0]
    assert re.search(r"epoch 1: loss \d+\.\d{3}\n$", outputs[1])
    assert "packed 200 documents" in outputs[2] and re.fullmatch(r"loss \d+\.\d{3}\n", outputs[3])
