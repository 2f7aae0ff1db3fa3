"""The house: one installed top-level name, and imports that only point down the layers."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The rooms of the library, in the order data flows: each may import those before it.
ORDER = ("dataio.formats", "dataio.augment", "dataio.sampling", "dataio.mixtures", "dataio.remote", "dataio.pipeline",
         "dataio.loader")


def _below(room: str) -> tuple[str, ...]:
    """The rooms of ``ORDER`` up to and including ``room``."""
    return ORDER[:ORDER.index(room) + 1]


# Each folder, the dataio packages it may import (besides its own), in the order data flows.
LAYERS = {
    "formats": _below("dataio.formats"),
    "augment": _below("dataio.augment"),
    "dataio/sampling": _below("dataio.sampling"),
    "dataio/mixtures": _below("dataio.mixtures"),
    "dataio/remote": _below("dataio.remote"),
    "dataio/pipeline": _below("dataio.pipeline"),
    "dataio/loader": _below("dataio.loader"),
    "dataio/images": ORDER + ("dataio.images",),
    "dataio/text": ORDER + ("dataio.text",),
    "dataio/train": ORDER + ("dataio.images", "dataio.text", "dataio.train", "dataio.errors"),
}


def imported_modules(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at top level) for every import in ``path``; ``from dataio import x`` counts as ``dataio.x``."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    top = {id(node) for node in tree.body}
    guarded = {id(n) for node in tree.body if isinstance(node, ast.Try) or _type_checking(node) for n in ast.walk(node)}
    for node in ast.walk(tree):
        at_top = id(node) in top or id(node) in guarded
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno, at_top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dataio":
                found += [(f"dataio.{alias.name}", node.lineno, at_top) for alias in node.names]
            else:
                found.append((node.module, node.lineno, at_top))
    return found


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` at the top of a file: imports for type checkers, at the top as far as layers go."""
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("folder", list(LAYERS))
def test_imports_only_point_down(folder):
    allowed = LAYERS[folder]
    wrong = []
    for path in python_files(folder):
        for module, line, _ in imported_modules(path):
            if module == "dataio" or not module.startswith("dataio."):
                continue
            if not module.startswith(allowed) or module.startswith("dataio.bench"):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_only_the_cli_imports_bench_and_only_inside_its_bench_and_demo_commands():
    wrong = []
    for path in python_files("dataio") + python_files("formats") + python_files("augment") + python_files("tests"):
        for module, line, at_top in imported_modules(path):
            if module.startswith(("dataio.bench", "bench")) and (path.name != "cli.py" or at_top):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)
    cli = (ROOT / "dataio" / "cli.py").read_text()
    handlers = {node.name for node in ast.walk(ast.parse(cli)) if isinstance(node, ast.FunctionDef)
                and any(m.startswith("dataio.bench") for m, _, _ in _imports_in(node))}
    assert handlers == {"_bench_images", "_bench_augment", "_bench_text", "_bench_sampler", "_demo"}


def _imports_in(node: ast.AST) -> list[tuple[str, int, bool]]:
    return [(n.module, n.lineno, False) for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.module]


def test_imports_inside_functions_say_why():
    """Every import sits at the top of its file, unless a comment on or above it says why it is lazy."""
    unexplained = []
    for folder in ("dataio", "formats", "augment", "bench"):
        for path in python_files(folder):
            if path.name == "cli.py":  # its module docstring explains: each command imports its stage lazily
                continue
            lines = path.read_text().splitlines()
            for module, line, at_top in imported_modules(path):
                if at_top:
                    continue
                context = " ".join(lines[max(0, line - 5):line]).lower()  # a comment on the line or just above its block
                if "lazy" not in context:
                    unexplained.append(f"{path.relative_to(ROOT)}:{line} imports {module} inside a function")
    assert not unexplained, "\n".join(unexplained)


def test_the_distribution_adds_exactly_one_top_level_name(tmp_path):
    script = (
        "import importlib, importlib.util, json\n"
        "found = {name: importlib.util.find_spec(name) is not None for name in ('bench', 'formats', 'augment')}\n"
        "import dataio.augment, dataio.formats, dataio.bench\n"
        "from dataio.augment import RandAugmentConfig\n"
        "kernel = importlib.util.find_spec('dataio.augment._randaugment_cpu')\n"
        "codec = importlib.util.find_spec('dataio.formats.jpeg._jpeg_codec')\n"
        "print(json.dumps({'found': found, 'kernel': kernel is not None, 'codec': codec is not None}))\n"
    )
    # run outside the repository, so the checkout's folders are not on sys.path
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["found"] == {"bench": False, "formats": False, "augment": False}
    assert result["kernel"] and result["codec"]
