"""Every file the library opens, it opens through one gate (``formats/file_gate.py``, issue 42): an ``ast`` scan of
dataio/, formats/, augment/ and bench/ lists every call that opens a file outside it, and the list is empty."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATE = "formats/file_gate.py"
WHOLE_FILE_CALLS = ("read_bytes", "read_text", "write_bytes", "write_text", "touch")  # Path's open-close in one call
IN_MEMORY = ("BytesIO", "BufferReader", "StringIO", "BufferOutputStream", "py_buffer")  # Image.open(io.BytesIO(data))
GATE_FILES = ("open_input", "open_new", "map_input", "open_parquet", "atomic_writer", "private_temp_path")  # gate's
HANDED_TYPES = ("BinaryIO", "IO[", "NativeFile", "BufferReader")  # a parameter typed as a file object, not a path

# Library calls that open a path themselves, under names other than "open": (receiver or None, name) -> the
# argument that is the path, by position or keyword (a file object or in-memory buffer there opens nothing).
# Receiver None: any object (``image.save(path)`` on a PIL image); a receiver given: only that module
# (``torch.save``, not a dataio method).
PATH_CALLS = {
    (None, "ParquetFile"): 0, (None, "read_table"): 0, (None, "read_metadata"): 0, (None, "read_schema"): 0,
    (None, "ParquetWriter"): 0, (None, "write_table"): 1, (None, "memory_map"): 0, (None, "open_file"): 0,
    (None, "open_stream"): 0, (None, "new_file"): 0, (None, "new_stream"): 0, (None, "OSFile"): 0,
    (None, "from_file"): 0, (None, "WebDataset"): 0, (None, "save"): 0, ("torch", "save"): 1,
    ("torch", "load"): 0, ("np", "load"): 0, ("np", "save"): 0, ("numpy", "load"): 0, ("numpy", "save"): 0,
    ("shutil", "copy"): 0, ("shutil", "copy2"): 0, ("shutil", "copyfile"): 0, ("shutil", "copytree"): 0,
    ("shutil", "move"): 0, (None, "savefig"): 0, (None, "export_chrome_trace"): 0,
    (None, "SummaryWriter"): "log_dir",
}

# Calls whose name ends in "open" that open no file themselves, each with why: they are dataio's own methods,
# whose bodies (scanned too) open what they open through the gate.
NOT_FILE_OPENS = {
    "ImageShards.open": "a shard folder's reader, built from its manifest: its files open in shard_files (gate)",
    "TokenData.open": "a token folder's reader: its shards open in token readers through the gate",
    "self._check_open": "EpochPosition's check that the loader is not closed: no file",
    "location.read_bytes": "a shard folder's Location: its local read is formats/remote/storage.py's, via the gate",
    "self._open": "WdsShardWriter starting its next shard: the shard's temp file is created by the gate",
    "checkpoint.save": "dataio/train/checkpoint.py's save: torch.save into the gate's atomic_writer",
    "remote_file.open": "formats/remote/source_files.py's RemoteRoot.open: range requests to an object, no local file",
}

# Calls that open a path outside the gate on purpose, each with why. Benchmark baselines run another library's
# own loader on the paths, as its users run it: what is measured is that library, reading the file its own way.
ALLOWED = {
    "bench/pair_baselines.py wds.WebDataset": "the open_clip-style baseline: webdataset's own loader on shard "
                                              "paths (absolute: never a pipe: URL), as its users run it",
    "bench/image_baselines.py wds.WebDataset": "the torchvision-style baseline: webdataset's own loader on shard "
                                               "paths (absolute: never a pipe: URL), as its users run it",
    "dataio/train/step_logs.py SummaryWriter": "tensorboard's event writer: it takes only a folder (dataio train's "
                                               "own --out/tensorboard) and names its file by time, host and pid",
    "bench/text_bench.py Tokenizer.from_file": "the on-the-fly text baseline: tokenizers' own loading in each "
                                               "worker, as the usual recipe does, of the benchmark's own file",
    "formats/remote/source_files.py pq.ParquetFile": "pyarrow over a source URL's buffered file (RemoteRoot.open): "
                                                     "range requests, no local path",
    "bench/cluster_scale_data.py (folder / f'{j:07d}.jpg').write_bytes": "the scale run's synthetic input tree in its "
                                                                         "own work folder: a million tiny files, "
                                                                         "written plainly (no fsync each)",
    "bench/cluster_scale_runs.py Path(f'/proc/{pid}/status').read_text": "the timed processes' peak memory: a /proc "
                                                                         "file, which the gate refuses by design",
    "bench/cluster_scale_runs.py (task / 'children').read_text": "the timed process's children, from /proc",
    "bench/cluster_scale_runs.py subprocess.Popen": "starts the converter it times; opens no file",
    "bench/ray_local_cluster.py subprocess.Popen": "starts a `ray start` node; opens no file",
    "bench/ray_local_cluster.py log.open": "a node's log, created by the benchmark in its own new temp folder",
    "bench/ray_local_cluster.py log.read_text": "the same log, read while the node starts",
    "bench/ray_local_cluster.py (entry / 'cmdline').read_bytes": "which processes belong to the cluster, from /proc",
    "formats/remote/source_files.py fs.open": "an object of a source URL (fsspec's buffered file of range "
                                              "requests): no local path, nothing the gate could check",
}


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _hands_over(call: ast.Call) -> bool:
    """An in-memory buffer (``Image.open(io.BytesIO(data))``), or a file the gate opened handed over as
    ``fileobj=`` (``tarfile.open(fileobj=f)``): the call opens no file itself."""
    first = call.args[0] if call.args else None
    return (isinstance(first, ast.Call) and _name(first) in IN_MEMORY) or any(k.arg == "fileobj" for k in call.keywords)


def _path_argument(call: ast.Call) -> ast.expr | None | bool:
    """The argument of a ``PATH_CALLS`` call that names its file (None: not given); False for other calls."""
    func = call.func
    receiver = ast.unparse(func.value).split(".")[0] if isinstance(func, ast.Attribute) else None
    key = (receiver, _name(call))
    where = PATH_CALLS.get(key if key in PATH_CALLS else (None, key[1]))
    if where is None:
        return False
    if isinstance(where, str):
        return next((k.value for k in call.keywords if k.arg == where), None)
    return call.args[where] if len(call.args) > where else None


def _opens_nothing(value: ast.expr) -> bool:
    """A call of the gate's or an in-memory buffer (either branch of ``a if c else b``): a file object."""
    if isinstance(value, ast.IfExp):
        return _opens_nothing(value.body) and _opens_nothing(value.orelse)
    return isinstance(value, ast.Call) and _name(value) in GATE_FILES + IN_MEMORY


def _file_objects(tree: ast.AST) -> set[str]:
    """Names and attributes bound to file objects in ``tree``: ``with open_input(p) as f``, ``f = open_new(p)``,
    ``buffer = io.BytesIO()``, a parameter typed ``BinaryIO``; what is handed over as them opens no file."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        pairs = []
        if isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs.append((node.optional_vars, node.context_expr))
        elif isinstance(node, ast.Assign):
            pairs.extend((target, node.value) for target in node.targets)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            if any(kind in ast.unparse(node.annotation) for kind in HANDED_TYPES):
                bound.add(node.arg)
        for target, value in pairs:
            if _opens_nothing(value):
                bound.add(ast.unparse(target))
    return bound


def _scopes(tree: ast.Module) -> list[tuple[ast.AST, set[str]]]:
    """Each function, outermost first (its bindings include its nested functions'), then the module, with the
    file objects bound there; ``self.x`` attributes count module-wide (bound in ``__init__``, used elsewhere)."""
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    attributes = {name for name in _file_objects(tree) if "." in name}
    return [(f, _file_objects(f) | attributes) for f in functions] + [(tree, _file_objects(tree))]


def _opens_a_path(call: ast.Call, file_objects: set[str]) -> bool:
    """A ``PATH_CALLS`` call given a path (not a file object the gate opened, nor an in-memory buffer)."""
    argument = _path_argument(call)
    if argument is False or argument is None:  # not a PATH_CALLS call; image.load(): no file named
        return False
    if isinstance(argument, ast.Call) and _name(argument) == "str" and len(argument.args) == 1:
        argument = argument.args[0]  # str(path): still that path
    return not _opens_nothing(argument) and ast.unparse(argument) not in file_objects


def file_opens(path: Path, root: Path = ROOT) -> list[str]:
    """``FILE:LINE call`` for every call in ``path`` that opens a file: any call whose name ends in ``open``
    (``open``, ``os.open``, ``Path.open``, ``Image.open``, ``tarfile.open``, ``os.fdopen``...) and Path's
    whole-file reads and writes; in-memory buffers and ``NOT_FILE_OPENS`` left out."""
    found, seen = {}, set()
    tree = ast.parse(path.read_text(), str(path))
    for scope, file_objects in _scopes(tree):  # each call judged in its outermost function
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call) or id(node) in seen or (name := _name(node)) is None:
                continue
            seen.add(id(node))
            if ast.unparse(node.func) in NOT_FILE_OPENS:
                continue
            opens = (name.endswith("open") or name in WHOLE_FILE_CALLS) and not _hands_over(node)
            if opens or _opens_a_path(node, file_objects):
                found[node.lineno] = f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node.func)}"
    return [found[line] for line in sorted(found)]


def library_files() -> list[Path]:
    return [p for folder in ("dataio", "formats", "augment", "bench") for p in sorted((ROOT / folder).rglob("*.py"))
            if "results" not in p.parts and p.relative_to(ROOT).as_posix() != GATE]  # results: scripts of a measurement


def test_no_file_is_opened_outside_the_gate():
    found = [line for path in library_files() for line in file_opens(path)]
    allowed = {f"{line.split(':')[0]} {line.split(' ', 1)[1]}" for line in found} & ALLOWED.keys()
    assert allowed == ALLOWED.keys(), f"allow-list entries no longer found: {sorted(ALLOWED.keys() - allowed)}"
    opens = [line for line in found if f"{line.split(':')[0]} {line.split(' ', 1)[1]}" not in ALLOWED]
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


def test_the_scan_sees_libraries_that_open_a_path_themselves(tmp_path):
    """pyarrow, tokenizers, PIL, torch, numpy, webdataset, shutil, matplotlib and tensorboard given a path open it
    themselves: listed; given a file the gate opened (bound by ``with``, assigned, or a parameter typed
    ``BinaryIO``) or an in-memory buffer they open nothing: not listed."""
    source = tmp_path / "paths.py"
    source.write_text(
        "import io, shutil, numpy as np, torch, pyarrow as pa, pyarrow.parquet as pq, webdataset as wds\n"
        "def reads(path, image):\n"
        "    pq.ParquetFile(path)\n    pq.read_table(path)\n    pa.memory_map(path)\n"
        "    pa.ipc.open_file(path)\n    pa.ipc.open_stream(path)\n    pa.OSFile(path)\n"
        "    Tokenizer.from_file(path)\n    image.save(path)\n    torch.save({}, path)\n    torch.load(path)\n"
        "    np.load(path)\n    np.save(path, 1)\n    wds.WebDataset([path])\n    shutil.copy(path, 'b')\n"
        "    pq.read_metadata(path)\n    pq.write_table(t, path)\n    fig.savefig(path)\n"
        "    profiler.export_chrome_trace(str(path))\n    SummaryWriter(log_dir=str(path))\n"
        "def hands_over(path, given: BinaryIO, image):\n"
        "    with open_input(path) as f:\n        pq.ParquetFile(f)\n        torch.load(f)\n"
        "    pa.ipc.open_file(map_input(path))\n    out = open_new(path)\n    pa.ipc.new_file(out, s)\n"
        "    buffer = io.BytesIO()\n    image.save(buffer)\n    np.save(buffer, 1)\n    pq.ParquetFile(given)\n"
        "    pa.ipc.open_file(pa.BufferReader(b''))\n    image.load()\n    open_parquet(path).metadata\n"
        "    source = map_input(path) if data is None else pa.BufferReader(data)\n    pa.ipc.open_file(source)\n"
        "    with atomic_writer(path) as out:\n        fig.savefig(out)\n"
        "    with private_temp_path(path, 'a trace') as partial:\n        profiler.export_chrome_trace(str(partial))\n")
    assert [line.split(" ")[1] for line in file_opens(source, tmp_path)] == [
        "pq.ParquetFile", "pq.read_table", "pa.memory_map", "pa.ipc.open_file", "pa.ipc.open_stream", "pa.OSFile",
        "Tokenizer.from_file", "image.save", "torch.save", "torch.load", "np.load", "np.save", "wds.WebDataset",
        "shutil.copy", "pq.read_metadata", "pq.write_table", "fig.savefig", "profiler.export_chrome_trace",
        "SummaryWriter"]
