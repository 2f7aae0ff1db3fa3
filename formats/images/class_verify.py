"""What ``dataio verify --deep`` checks of a classification folder beyond every folder's (its ``verify`` part in
``dataio.formats.kinds``): each sample's class as its shard stores it, a tar's ``KEY.cls`` member or an Arrow
shard's ``label`` column, against the sample table's label. Tar members are listed and only ``.cls`` members
read (``shard_members``); nothing is extracted."""

from __future__ import annotations

import tarfile
from pathlib import Path

from dataio.formats.dataset.manifest import Manifest
from dataio.formats.dataset.shard_members import LABEL_MEMBER, MAX_LABEL_BYTES, decode_label, member_extension
from dataio.formats.dataset.verify_context import VerifyContext, arrow_batches
from dataio.formats.file_gate import open_input


def verify_labels(context: VerifyContext) -> None:
    """With ``deep``, every readable row's stored class against the table's label, each disagreement a problem."""
    table = context.table
    if not context.deep or table is None or table.label is None:
        return
    labels = _stored_labels(context.folder, context.manifest, context.bad_shards)
    for sample in range(len(table)):
        shard = int(table.shard[sample])
        if shard in context.bad_shards or sample in context.faults:
            continue
        key = table.key(sample)
        stored = labels.get((shard, key))
        if stored is not None and stored != int(table.label[sample]):
            context.report.problems.append(f"sample {key!r} in shard {context.manifest.shards[shard].file}: .cls says "
                                           f"{stored}, the sample table {int(table.label[sample])}")


def _label_of(data: bytes) -> int | None:
    try:
        return decode_label(data)
    except ValueError:
        return None


def _stored_labels(folder: Path, manifest: Manifest, bad_shards: set[int]) -> dict[tuple[int, str], int | None]:
    """``(shard, key) -> label`` from every tar's ``.cls`` members (listed and read; nothing is extracted)
    and every Arrow image shard's label column."""
    labels: dict[tuple[int, str], int | None] = {}
    for index, entry in enumerate(manifest.shards):
        if index in bad_shards:
            continue
        if entry.file.endswith(".arrow"):  # image shards in HF's layout: the label column
            for batch in arrow_batches(folder / entry.file):
                for key, label in zip(batch.column("key").to_pylist(), batch.column("label").to_pylist(),
                                      strict=True):
                    labels[(index, key)] = label
            continue
        with open_input(folder / entry.file) as file, tarfile.open(fileobj=file, mode="r:") as tar:
            for member in tar:
                if member.isreg() and member_extension(member.name) == LABEL_MEMBER and member.size <= MAX_LABEL_BYTES:
                    handle = tar.extractfile(member)
                    if (index, member.name[:-4]) not in labels:  # a repeated KEY.cls: the first counts
                        labels[(index, member.name[:-4])] = _label_of(handle.read()) if handle else None
    return labels
