"""The house: one installed top-level name, and imports that only point down the layers."""

from __future__ import annotations

from itertools import pairwise

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
    # the image kinds' rooms stand on the shared image room; pairs pad their captions' ids with the text path's C
    # collate (dataio.text.collate imports no image module: no circle)
    "dataio/pairs": ORDER + ("dataio.images", "dataio.pairs", "dataio.text.collate"),
    "dataio/detection": ORDER + ("dataio.images", "dataio.detection"),
    "dataio/views": ORDER + ("dataio.images", "dataio.views"),
    "dataio/text": ORDER + ("dataio.text",),
    "dataio/train": ORDER + ("dataio.images", "dataio.pairs", "dataio.detection", "dataio.views", "dataio.text",
                             "dataio.train", "dataio.errors"),
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
    commands = {ROOT / "dataio" / "cli" / "bench.py", ROOT / "dataio" / "cli" / "demo.py"}
    wrong = []
    for path in python_files("dataio") + python_files("formats") + python_files("augment") + python_files("tests"):
        for module, line, at_top in imported_modules(path):
            if module.startswith(("dataio.bench", "bench")) and (path not in commands or at_top):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)
    handlers = {node.name for path in commands for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.FunctionDef)
                and any(m.startswith("dataio.bench") for m, _, _ in _imports_in(node))}
    assert handlers == {"run_images", "run_augment", "run_text", "run_sampler", "run_pairs", "run_detection",
                        "run_views", "run"}


def _imports_in(node: ast.AST) -> list[tuple[str, int, bool]]:
    return [(n.module, n.lineno, False) for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.module]


def test_imports_inside_functions_say_why():
    """Every import sits at the top of its file, unless a comment on or above it says why it is lazy."""
    unexplained = []
    for folder in ("dataio", "formats", "augment", "bench"):
        for path in python_files(folder):
            if path.parent.name == "cli":  # its docstring explains: each command imports its stage lazily
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


def _module_name(path: Path) -> str:
    """The installed module name of a library file (``augment/x.py`` is ``dataio.augment.x``)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in ("augment", "formats", "bench"):
        parts = ["dataio", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_files(path: Path, files: dict[str, Path]) -> set[str]:
    """The library modules ``path`` imports, at the top or lazily, leaving out ``if TYPE_CHECKING:`` blocks (never
    run); ``from package import module`` names the module."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = {id(n) for node in tree.body if _type_checking(node) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                if module in files:
                    found.add(module)
                elif not (node.module in files and _is_extension(files[node.module].parent, alias.name)):
                    found.add(node.module)  # a name the package's __init__ defines
    return {name for name in found if name in files}


def _is_extension(package: Path, name: str) -> bool:
    """Whether ``name`` in ``package`` is a C extension module (its source ``name.c``): it imports nothing back."""
    return (package / f"{name}.c").is_file()


def test_no_import_circle_anywhere_in_the_library():
    """Every import between library modules, lazy ones too (a lazy import closed the loader <-> ShardDataset
    circle before the skeleton): the graph has no cycle, inside a room or across rooms."""
    files = {_module_name(p): p for folder in ("dataio", "formats", "augment", "bench") for p in python_files(folder)
             if "results" not in p.parts}
    graph = {name: _imported_files(path, files) - {name} for name, path in files.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            raise AssertionError("import circle: " + " -> ".join(cycle))


def test_files_are_short_and_the_loaders_are_facades():
    """Every library file under 400 lines; ImageLoader and TextLoader under 250 each (issue 34): what both do
    lives in the skeleton (dataio/pipeline, dataio/loader), each kind's reading in its source."""
    long = [f"{p.relative_to(ROOT)}: {len(p.read_text().splitlines())} lines"
            for folder in ("dataio", "formats", "augment", "bench") for p in python_files(folder)
            if len(p.read_text().splitlines()) >= 400]
    assert not long, "\n".join(long)
    for path in (ROOT / "dataio" / "images" / "loader.py", ROOT / "dataio" / "text" / "loader.py"):
        assert len(path.read_text().splitlines()) < 250, path


def test_every_library_folder_is_a_listed_package():
    """A folder of library modules missing from pyproject's ``packages`` is left out of the wheel (and out of
    the API pages' imports): ``formats/coco`` was, found by the docs build."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    names = {"dataio": "dataio", "augment": "dataio.augment", "formats": "dataio.formats", "bench": "dataio.bench"}
    folders = {names[top] + "".join("." + part for part in p.parent.relative_to(ROOT / top).parts)
               for top in names for p in (ROOT / top).rglob("*.py")
               if "__pycache__" not in p.parts and "results" not in p.parts}  # results: scripts of a measurement
    assert folders - listed == set()


def _formats_folder(module: str) -> str:
    """The folder of ``formats/`` a library module lies in (``dataio.formats.dataset.manifest``: ``formats/dataset``);
    the modules at its top (errors, files, limits, kinds...) are the folder ``formats``."""
    parts = module.split(".")[2:]
    return f"formats/{parts[0]}" if parts and (ROOT / "formats" / parts[0]).is_dir() else "formats"


def test_no_import_circle_between_the_folders_of_formats():
    """The folders of ``formats/`` as nodes, every import between their modules (lazy ones too; ``if TYPE_CHECKING:``
    blocks never run) as an edge: no cycle. A folder stands on those below it; what two folders share lives in the
    lower one (or at the top of ``formats/``), never in a circle (``formats.dataset`` <-> ``formats.remote`` was one,
    and ``formats.dataset`` <-> ``formats.coco`` through verify, and ``formats.text`` <-> ``formats.ranks``)."""
    files = {_module_name(p): p for p in python_files("formats")}
    edges: dict[str, dict[str, str]] = {}  # folder -> {folder it imports: one import that makes the edge}
    for name, path in files.items():
        source = _formats_folder(name)
        for imported in sorted(_imported_files(path, files)):
            target = _formats_folder(imported)
            if target != source:
                edges.setdefault(source, {}).setdefault(target, f"{path.relative_to(ROOT)} imports {imported}")
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in pairwise(cycle)]
            raise AssertionError("folder circle in formats/: " + " -> ".join(cycle) + "\n" + "\n".join(steps))
