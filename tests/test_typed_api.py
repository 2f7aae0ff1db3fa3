"""The public API is typed (issue 24 §2): mypy sees real types, not Any, through ``dataio``'s lazy names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALLED_AS = {"formats": "formats", "augment": "augment", "bench": "bench"}  # dataio.<name> -> repository folder


def _package_tree(tmp_path: Path) -> Path:
    """``dataio`` laid out as installed (formats/, augment/, bench/ inside it), as symlinks, for mypy's search
    path: the editable install maps those folders with an import hook that mypy does not run."""
    package = tmp_path / "tree" / "dataio"
    package.mkdir(parents=True)
    for entry in (ROOT / "dataio").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in INSTALLED_AS.items():
        (package / name).symlink_to(ROOT / folder)
    return package.parent


def test_public_api_has_no_any(tmp_path):
    tree = _package_tree(tmp_path)
    # mypy's incremental cache kept in the venv: a rerun of the suite reads torch's analysed modules back
    # (~1 s here) instead of analysing them again (~25 s); mypy itself re-checks whatever changed
    cache = Path(sys.prefix) / "mypy-cache-typed-api"
    done = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
                           "--cache-dir", str(cache), str(ROOT / "tests" / "typing" / "public_api.py")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "MYPYPATH": str(tree)})
    assert done.returncode == 0, done.stdout + done.stderr  # notes only: no type error in the snippet
    revealed = [line.split("Revealed type is ", 1)[1] for line in done.stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == (ROOT / "tests" / "typing" / "public_api.py").read_text().count("reveal_type(")
    leaked = [line for line in done.stdout.splitlines() if line.endswith('Revealed type is "Any"')]
    assert not leaked, "Any leaks from the public API:\n" + "\n".join(leaked)


def test_py_typed_is_shipped():
    assert (ROOT / "dataio" / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()
