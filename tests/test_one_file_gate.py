"""Every file the library opens, it opens through one gate (``formats/file_gate.py``, issue 42): an ``ast`` scan of
dataio/, formats/, augment/ and bench/ lists every call that opens a file outside it, and the list is empty."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = "formats/file_gate.py"
WHOLE_FILE_CALLS = ("read_bytes", "read_text", "write_bytes", "write_text")  # Path's open-read-close in one call
IN_MEMORY = ("BytesIO", "BufferReader", "StringIO")  # Image.open(io.BytesIO(data)) opens no file

# Calls whose name ends in "open" that open no file themselves, each with why: they are dataio's own methods,
# whose bodies (scanned too) open what they open through the gate.
NOT_FILE_OPENS = {
    "ImageShards.open": "a shard folder's reader, built from its manifest: its files open in shard_files (gate)",
    "TokenData.open": "a token folder's reader: its shards open in token readers through the gate",
    "self._check_open": "EpochPosition's check that the loader is not closed: no file",
    "location.read_bytes": "a shard folder's Location: its local read is formats/remote/storage.py's, via the gate",
    "self._open": "WdsShardWriter starting its next shard: the shard's temp file is created by the gate",
}


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _hands_over(call: ast.Call) -> bool:
    """An in-memory buffer (``Image.open(io.BytesIO(data))``), or a file the gate opened handed over as
    ``fileobj=`` (``tarfile.open(fileobj=f)``): the call opens no file itself."""
    first = call.args[0] if call.args else None
    return (isinstance(first, ast.Call) and _name(first) in IN_MEMORY) or any(k.arg == "fileobj" for k in call.keywords)


def file_opens(path: Path, root: Path = ROOT) -> list[str]:
    """``FILE:LINE call`` for every call in ``path`` that opens a file: any call whose name ends in ``open``
    (``open``, ``os.open``, ``Path.open``, ``Image.open``, ``tarfile.open``, ``os.fdopen``...) and Path's
    whole-file reads and writes; in-memory buffers and ``NOT_FILE_OPENS`` left out."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call) or (name := _name(node)) is None:
            continue
        if not (name.endswith("open") or name in WHOLE_FILE_CALLS) or _hands_over(node):
            continue
        if ast.unparse(node.func) in NOT_FILE_OPENS:
            continue
        found.append((node.lineno, f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}"))
    return [line for _, line in sorted(found)]


def library_files() -> list[Path]:
    return [p for folder in ("dataio", "formats", "augment", "bench") for p in sorted((ROOT / folder).rglob("*.py"))
            if "results" not in p.parts and p.relative_to(ROOT).as_posix() != GATE]  # results: scripts of a measurement


def test_no_file_is_opened_outside_the_gate():
    opens = [found for path in library_files() for found in file_opens(path)]
    assert opens == [], "files opened outside formats/file_gate.py:\n" + "\n".join(opens)


def test_the_scan_sees_every_kind_of_open(tmp_path):
    """The scan itself: each way of opening a file is listed, an in-memory buffer is not."""
    source = tmp_path / "opens.py"
    source.write_text("import io, os, tarfile, gzip\nfrom PIL import Image\nfrom pathlib import Path\n"
                      "open('a')\nos.open('a', 0)\nPath('a').open()\nio.open('a')\nImage.open('a')\n"
                      "tarfile.open('a')\ngzip.open('a')\nos.fdopen(3)\nPath('a').read_bytes()\n"
                      "Path('a').write_text('x')\nImage.open(io.BytesIO(b''))\ntarfile.open(fileobj=f)\n")
    assert [line.split(" ")[1] for line in file_opens(source, tmp_path)] == [
        "open", "os.open", "Path('a').open", "io.open", "Image.open", "tarfile.open", "gzip.open", "os.fdopen",
        "Path('a').read_bytes", "Path('a').write_text"]
