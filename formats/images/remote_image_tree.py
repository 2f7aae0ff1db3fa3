"""The walk of an image source folder on object storage (``s3://bucket/train``), by the local walk's rules.

A conversion of a URL must pack what the conversion of a local copy of the same tree packs, in the same order,
with the same labels and the same ``rejected.jsonl``; so this walk applies ``image_tree``'s rules to one
recursive listing (a single paged LIST, not a request per folder): names as bytes sorted by their bytes, class
folders at the top, each folder's files before its subfolders, ImageFolder's extensions, WebP only with a
decoder, hidden files and folders not packed (listed when they hold images, with ``skipped_folders``' reasons),
earlier outputs and stray images at the top listed, other pictures listed by extension, and a file without an
extension sniffed by a range read of its first bytes (``image_names``' signatures). Object storage has no links,
FIFOs or inodes, so the local walk's loop and special-file rules have nothing to find here. Folders exist only
as the prefixes of objects: an empty folder is not seen (the local walk packs nothing from one either).

The three modes are the three kinds' folders: ``classes`` (``image_tree.walk_image_tree``), ``captions``
(``caption_sources.walk_caption_folder``: the ``.txt`` files are noted, the caption rules applied by the caller)
and ``views`` (``view_sources.walk_view_folder``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

import numpy as np

from dataio.formats.errors import UsageError
from dataio.formats.images.detection_layouts import LAYOUTS
from dataio.formats.images.image_names import (_SIGNATURES, _SNIFF_BYTES, extension_reason, is_packed_name,
                                               no_extension_reason, other_picture_extension)
from dataio.formats.images.image_tree import ImageTree, escape_path, unescape_path, unsupported_extensions
from dataio.formats.images.skipped_folders import (OUTPUT_MARKERS, hidden_class_reason, hidden_file_reason,
                                                   hidden_in_class_reason, output_folder_reason, stray_image_reason)
from dataio.formats.remote.source_files import RemoteRoot, SourceUnreadable

CAPTION_SUFFIX = b".txt"


class _Listing:
    """The folders of a listing: each folder's files (name -> size) and subfolder names, as bytes."""

    def __init__(self, objects: dict[str, int]) -> None:
        self.files: dict[bytes, dict[bytes, int]] = defaultdict(dict)
        self.folders: dict[bytes, set[bytes]] = defaultdict(set)
        self.odd: list[bytes] = []  # keys with an empty part that hold bytes: listed, never packed
        for key, size in objects.items():
            parts = key.encode("utf-8", "surrogateescape").split(b"/")
            if any(not part for part in parts):  # "a//b" or a folder marker "a/": no file of a local tree
                if size:  # a folder marker is empty; an object of bytes here is named, not dropped unsaid
                    self.odd.append(b"/".join(parts))
                continue
            for depth in range(len(parts) - 1):
                self.folders[b"/".join(parts[:depth])].add(parts[depth])
            self.files[b"/".join(parts[:-1])][parts[-1]] = size

    def entries(self, folder: bytes) -> list[tuple[bytes, bool]]:
        """``(name, is a folder)`` of the folder's entries, sorted by their bytes (as ``os.scandir`` sorted)."""
        return sorted([(name, False) for name in self.files.get(folder, {})] +
                      [(name, True) for name in self.folders.get(folder, set())])

    def images_under(self, folder: bytes) -> int:
        """Files with ImageFolder's extensions anywhere under ``folder`` (``skipped_folders.images_under``)."""
        count, stack = 0, [folder]
        while stack:
            here = stack.pop()
            count += sum(map(is_packed_name, self.files.get(here, {})))
            stack.extend(_join(here, name) for name in self.folders.get(here, set()))
        return count

    def holds(self, folder: bytes, name: bytes) -> bool:
        return name in self.files.get(folder, {}) or name in self.folders.get(folder, set())


def _join(folder: bytes, name: bytes) -> bytes:
    return name if not folder else folder + b"/" + name


class RemoteWalk:
    """One walk of a listing: what was found and rejected (``image_tree._Walk``'s rules)."""

    def __init__(self, root: RemoteRoot, listing: _Listing, captions: bool) -> None:
        self.root, self.listing, self.note_captions = root, listing, captions
        self.unsupported = unsupported_extensions()
        self.files: list[tuple[str, int]] = []
        self.rejected: list[tuple[str, str]] = []
        self.captions: set[bytes] = set()

    def reject(self, relative: bytes, reason: str) -> None:
        self.rejected.append((escape_path(relative), reason))

    def reject_odd_keys(self) -> None:
        """Objects whose key has an empty part (``a//b.jpg``, ``a.jpg/``), which no local folder can hold."""
        for key in self.listing.odd:
            self.reject(key, "an object key with an empty part ('//' or a trailing '/'), which no local folder "
                             "can hold: not packed")

    def walk_class(self, relative: bytes, label: int) -> None:
        """Every image under the folder ``relative``: each folder's files, then its subfolders, sorted."""
        stack = [relative]
        while stack:
            folder = stack.pop()
            subfolders = []
            for name, is_folder in self.listing.entries(folder):
                path = _join(folder, name)
                if name.startswith(b"."):
                    self._hidden(name, is_folder, path, relative)
                elif is_folder:
                    subfolders.append(path)
                elif not is_packed_name(name):
                    self._not_packed(name, path)
                elif (why := next((why for ext, why in self.unsupported.items()
                                   if name.lower().endswith(ext.encode())), None)) is not None:
                    self.reject(path, why)
                else:
                    self.files.append((escape_path(path), label))
            stack.extend(reversed(subfolders))

    def _hidden(self, name: bytes, is_folder: bool, path: bytes, class_folder: bytes) -> None:
        if is_folder:
            images = self.listing.images_under(path)
            if images:
                self.reject(path, hidden_in_class_reason(images, escape_path(class_folder)))
        elif is_packed_name(name):
            self.reject(path, hidden_file_reason(escape_path(class_folder)))

    def _not_packed(self, name: bytes, path: bytes) -> None:
        if self.note_captions and name.lower().endswith(CAPTION_SUFFIX):
            self.captions.add(path)
            return
        extension = other_picture_extension(name)
        if extension is not None:
            self.reject(path, extension_reason(extension))
        elif b"." not in name and self._size(path) and (kind := self._sniff(path)) is not None:
            self.reject(path, no_extension_reason(kind))

    def _size(self, path: bytes) -> int:
        folder, _, name = path.rpartition(b"/")
        return self.listing.files.get(folder, {}).get(name, 0)

    def _sniff(self, path: bytes) -> str | None:
        """``image_names.sniff_picture`` by a range read of the object's first bytes (an empty one has none)."""
        try:
            head = self.root.head(path.decode("utf-8", "surrogateescape"), _SNIFF_BYTES)
        except (OSError, SourceUnreadable):  # gone since the listing, or unreadable: not listed, as a local one
            return None
        return next((kind for offset, magic, kind in _SIGNATURES if head[offset:offset + len(magic)] == magic), None)


def walk_remote_tree(root: RemoteRoot, *, classes: bool) -> ImageTree:
    """The inputs of the source folder ``root``: its class folders' images (``classes``), or every image."""
    listing = _Listing(root.listing())
    walk = RemoteWalk(root, listing, captions=False)
    walk.reject_odd_keys()
    if not classes:
        walk.walk_class(b"", -1)
        if not walk.files and not walk.rejected:
            raise UsageError(f"source folder {root} holds no images")
        return ImageTree([], walk.files, sorted(walk.rejected))
    _refuse_detection_layout(root, listing)
    class_folders = _class_folders(walk)
    if not class_folders:
        raise UsageError(f"source folder {root} has no class subfolders (expected SRC/<class>/<image>)")
    for label, name in enumerate(class_folders):
        walk.walk_class(name, label)
    return ImageTree([escape_path(name) for name in class_folders], walk.files, sorted(walk.rejected))


def caption_walk(root: RemoteRoot, label: int) -> RemoteWalk:
    """A caption folder's walk from the top (``caption_sources``' ``_CaptionWalk``): its images, what it rejected,
    and the ``.txt`` files it passed (``captions``), for ``walk_caption_folder`` to pair."""
    walk = RemoteWalk(root, _Listing(root.listing()), captions=True)
    walk.reject_odd_keys()
    walk.walk_class(b"", label)
    return walk


def _refuse_detection_layout(root: RemoteRoot, listing: _Listing) -> None:
    """``detection_layouts.refuse_detection_layout`` on the listing."""
    for images, labels, suffix, what, command in LAYOUTS:
        label_folder = labels.encode()
        if images.encode() in listing.folders.get(b"", set()) and any(
                name.lower().endswith(suffix.encode()) for folder, names in listing.files.items()
                if folder == label_folder or folder.startswith(label_folder + b"/") for name in names):
            raise UsageError(f"{root}: {what}, not class folders: its subfolders are not classes; convert it "
                             f"with {command}")


def _class_folders(walk: RemoteWalk) -> list[bytes]:
    """``image_tree._class_folders`` on the listing: the class folders, the rest of the top listed."""
    listing = walk.listing
    every_folder, folders = [], []
    for name, is_folder in listing.entries(b""):
        if not is_folder:
            if is_packed_name(name):
                walk.reject(name, stray_image_reason())
            continue
        every_folder.append(name)
        if name.startswith(b"."):
            continue
        marker = next((m for m in OUTPUT_MARKERS if listing.holds(name, m.encode())), None)
        if marker is not None:
            walk.reject(name, output_folder_reason(marker))
        else:
            folders.append(name)
    for position, name in enumerate(every_folder):
        if name.startswith(b".") and (images := listing.images_under(name)):
            walk.reject(name, hidden_class_reason(images, position, sum(other > name for other in folders)))
    return folders


def remote_sizes(root: RemoteRoot, files: list[tuple[str, int]]) -> np.ndarray:
    """Each input's size from one listing (not a request per object), to balance the ranks by bytes."""
    sizes = root.listing()
    return np.array([sizes.get(str(PurePosixPath(unescape_path(relative).decode("utf-8", "surrogateescape"))), 0)
                     for relative, _ in files], dtype=np.int64)
