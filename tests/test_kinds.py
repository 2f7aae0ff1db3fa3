"""The kinds of sample: one table (``dataio.formats.kinds``), each kind's parts in its own rooms, and the shared
rooms asking the table instead of branching on a kind (issue 41: 58 such branches in 17 shared files before)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from dataio.formats.dataset.sample_kind import SAMPLE_KINDS
from dataio.formats.kinds import KINDS, PARTS

ROOT = Path(__file__).resolve().parents[1]
INSTALLED = {"dataio.formats": "formats", "dataio.augment": "augment", "dataio.bench": "bench"}
# Where any kind's parts may also live: the image kinds' shared room, the skeleton's generic finish, the trainer's
# tasks (one module per task), the on-disk formats' shared declarations.
SHARED_ROOMS = ("dataio/images", "dataio/pipeline", "dataio/train", "formats/dataset")
# The names whose test in an ``if`` is a branch on the kind of sample: the predicates the kinds were once guessed by,
# a loader's kind options, and the declared kind itself.
PREDICATES = {"holds_pairs", "holds_labels", "declares_boxes", "declares_masks", "has_boxes", "pairs", "is_pairs",
              "with_boxes", "captions", "caption_column", "targets", "sample_kind", "declared_kind", "kind_of"}
MOST_BRANCHES = 5
TABLE = "formats/kinds.py"  # the table itself, where every question on a kind is answered


def _path_of(module: str) -> str:
    """The repository path of a module (``dataio.formats.x.y`` is ``formats/x/y.py``)."""
    for prefix, folder in INSTALLED.items():
        if module == prefix or module.startswith(prefix + "."):
            module = folder + module[len(prefix):]
    return module.replace(".", "/") + ".py"


def _rooms() -> list[str]:
    """The folders that hold one kind's own code, other than classification's (which is the shared image room)."""
    return [room for kind in KINDS.values() if kind.name != "classification" for room in kind.rooms]


def test_the_table_names_every_kind_the_manifest_can_declare():
    assert tuple(KINDS) == SAMPLE_KINDS


@pytest.mark.parametrize("name", list(KINDS))
def test_every_part_of_every_kind_resolves_and_lies_in_its_rooms(name):
    kind = KINDS[name]
    for part in PARTS:
        ref = getattr(kind, part)
        if not ref:
            assert part in ("check", "verify", "packing", "task", "options"), f"{name} has no {part}"
            continue
        assert kind.part(part) is not None, (name, part)
        path = _path_of(ref.partition(":")[0])
        assert (ROOT / path).is_file(), path
        assert path.startswith(kind.rooms + SHARED_ROOMS), f"{name}'s {part} is {path}, outside its rooms"


def _branches(path: Path, classes: set[str]) -> list[int]:
    """The lines of ``if``s (and conditional expressions) in ``path`` whose test is about the kind of sample: a
    predicate's name (called, read as an attribute, or a variable holding one: ``holds_pairs(fields)``,
    ``config.captions``, ``if pairs:``), a kind's name as a string, or ``isinstance`` of a class a kind's room
    defines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, (ast.If, ast.IfExp)):
            continue
        names = set()
        for part in ast.walk(node.test):
            if isinstance(part, ast.Name):
                names.add(part.id)
            if isinstance(part, ast.Call) and isinstance(part.func, ast.Name):
                if part.func.id == "isinstance" and len(part.args) == 2:
                    names |= {n.id for n in ast.walk(part.args[1]) if isinstance(n, ast.Name)} & classes
            elif isinstance(part, ast.Attribute):
                names.add(part.attr)
            elif isinstance(part, ast.Constant) and part.value in SAMPLE_KINDS:
                names.add("kind name")
        if names & (PREDICATES | classes | {"kind name"}):
            found.append(node.lineno)
    return found


def _room_classes() -> set[str]:
    """The classes the kinds' own rooms define (an ``isinstance`` of one is a kind test)."""
    classes = set()
    for room in _rooms():
        for path in (ROOT / room).rglob("*.py"):
            classes |= {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}
    return classes


def branches_in_shared_files(root: Path = ROOT) -> dict[str, list[int]]:
    """``{shared file: lines}`` of kind branches in the library's files outside the kinds' own rooms."""
    rooms, classes = tuple(_rooms()), _room_classes()
    found = {}
    for folder in ("dataio", "formats", "augment"):
        for path in sorted((root / folder).rglob("*.py")):
            relative = str(path.relative_to(root))
            if relative.startswith(rooms) or relative == TABLE or "__pycache__" in path.parts:
                continue
            lines = _branches(path, classes)
            if lines:
                found[relative] = lines
    return found


def test_the_shared_rooms_ask_the_table_instead_of_branching_on_kinds():
    found = branches_in_shared_files()
    total = sum(len(lines) for lines in found.values())
    assert total <= MOST_BRANCHES, "\n".join(f"{path}: lines {lines}" for path, lines in found.items())


def test_the_layout_test_knows_every_kind_room():
    layout = importlib.import_module("tests.test_layout")
    for room in _rooms():
        if room.startswith("dataio/") and (ROOT / room).is_dir() and room.count("/") == 1:
            assert room in layout.LAYERS, f"{room} is not in tests/test_layout.py's LAYERS"
