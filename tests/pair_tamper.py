"""Copies of an indexed pair folder with their sample table or manifest tampered with (hostile tests)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa

TAMPERED_ROW = 3  # the sample whose .json location a per-sample kind breaks


def tampered(pair_tars: Path, folder: Path, kind: str) -> Path:
    """A copy of the indexed pair tars whose sample table or manifest is rewritten as ``kind`` says."""
    shutil.copytree(pair_tars, folder)
    table = pa.ipc.open_file(folder / "samples.arrow").read_all()
    rows = len(table)

    def put(name: str, column: pa.Array) -> None:
        nonlocal table
        table = table.set_column(table.schema.get_field_index(name), name, column)

    if kind == "caption_of_integers":
        put("caption", pa.array(range(rows), pa.int64()))
    elif kind == "no_caption":
        table = table.drop_columns(["caption"])
    elif kind == "ids_of_strings":
        put("input_ids", pa.array([["1", "2"]] * rows, pa.large_list(pa.string())))
    elif kind == "ids_of_int64":
        put("input_ids", pa.array([[-5, 3]] * rows, pa.large_list(pa.int64())))
    elif kind == "no_json_offset":
        table = table.drop_columns(["json_offset"])
    elif kind in ("json_size_huge", "json_past_the_end"):  # one sample's .json: TAMPERED_ROW's
        name, value = ("json_size", 1 << 40) if kind == "json_size_huge" else ("json_offset", 1 << 40)
        put(name, pa.array([value if row == TAMPERED_ROW else v for row, v in enumerate(table.column(name).to_pylist())],
                           pa.int64()))
    else:
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["options"]["tokenizer"].update({"vocab_zero": {"vocab_size": 0}, "pad_not_int": {"pad_id": "zero"},
                                                 "eos_past_vocab": {"eos_id": 10**6}}[kind])
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return folder
    with pa.OSFile(str(folder / "samples.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return folder
