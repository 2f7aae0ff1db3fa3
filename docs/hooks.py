"""mkdocs hook: the API reference reads the package as it installs.

pyproject.toml installs the top-level folders formats/, augment/ and bench/ as dataio.formats, dataio.augment and
dataio.bench, and some subpackages have no ``__init__.py``; griffe (mkdocstrings' reader) finds neither. So before
each build the ``.py`` files are copied into ``build/api-src/`` in their installed layout, from pyproject's
``packages`` and ``package-dir``, and mkdocs.yml points mkdocstrings there. Nothing is imported or executed.

The changelog page is the repository's CHANGELOG.md itself, added to the site at build time (one file to keep).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the docs extra installs tomli there
    import tomli as tomllib

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

MIRROR = Path("build") / "api-src"


def _mirror(root: Path) -> Path:
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setuptools.get("package-dir", {})
    target = root / MIRROR
    shutil.rmtree(target, ignore_errors=True)
    for package in setuptools["packages"]:
        parent = max((p for p in folders if package == p or package.startswith(p + ".")), key=len, default=None)
        source = root / (folders[parent] + package[len(parent):].replace(".", "/") if parent
                         else package.replace(".", "/"))
        out = target / package.replace(".", "/")
        out.mkdir(parents=True, exist_ok=True)
        for module in source.glob("*.py"):
            shutil.copyfile(module, out / module.name)
        (out / "__init__.py").touch()
    return target


@event_priority(100)  # before mkdocstrings' on_config, which keeps only the paths that exist
def on_config(config):
    _mirror(Path(config.config_file_path).parent)
    return config


def on_files(files: Files, config) -> Files:
    changelog = Path(config.config_file_path).parent / "CHANGELOG.md"
    files.append(File.generated(config, "changelog.md", abs_src_path=str(changelog)))
    return files
