"""Declared kinds (``sample_kind``) that contradict the folder they are written in: the layout, the declared fields,
the sample table. Every reader trusts the declaration; nothing reconciles it with what the folder holds."""

from __future__ import annotations

import pytest

import dataio
from dataio.errors import DataioError
from dataio.formats.kinds import KINDS
from tests.hostile_helpers import DROP, one_line_refusal, rewrite_manifest, run_cli


# Class 3 (artifacts trusted as they are) / 5 (silently wrong): `dataio verify` says OK for a folder whose declared
# kind no loader can read it as (an image folder declared "tokens", a classification table declared "pairs" or
# "detection", a views table without labels declared "classification"); dataio.DataLoader then refuses it (or
# crashes, below). verify should name sample_kind against what the folder holds, exit 1.
@pytest.mark.parametrize("base, declared", [("coloured_shards", "tokens"), ("coloured_shards", "pairs"),
                                            ("coloured_shards", "detection"), ("views_shards", "classification")])
def test_verify_names_a_declared_kind_the_folder_does_not_hold(request, tmp_path, base, declared):
    folder = rewrite_manifest(request.getfixturevalue(base), tmp_path / "out", sample_kind=declared)
    result = run_cli("verify", str(folder), cwd=tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode == 1, said
    assert "sample_kind" in said or declared in said, said


# Class 8 (errors): a views-kind table (no label column) whose manifest declares "classification" (or, packed
# before kinds, declares fields and no kind: inferred "classification") is a bare AssertionError from
# image_batches.start_batch at the first batch, and `dataio train` prints a traceback. It should be one line naming
# the folder and the missing labels.
@pytest.mark.parametrize("change", [dict(sample_kind="classification"), dict(sample_kind=DROP)],
                         ids=["declared-classification", "legacy-inferred"])
def test_a_classification_kind_on_a_table_without_labels_is_one_named_error(views_shards, tmp_path, change):
    folder = rewrite_manifest(views_shards, tmp_path / "out", **change)
    with pytest.raises(DataioError) as caught:  # today: AssertionError, no message
        next(iter(dataio.DataLoader(folder, batch_size=4)))
    assert "label" in str(caught.value) and "out" in str(caught.value)
    err = one_line_refusal(run_cli("train", "--train", str(folder), "--epochs", "1", "--batch-size", "2",
                                   "--image-size", "32", "--out", str(tmp_path / "run"), "--device", "cpu",
                                   cwd=tmp_path))
    assert "label" in err


# Class 8 (errors): a classification table declared "pairs" is refused as "captions is for image-text pair folders;
# ... holds images with classes": the message blames the `captions` keyword, which the user never gave
# (dataio.DataLoader picked PairLoader from the manifest), and `dataio train` blames `--captions`, a flag it does not
# have. The message should say that the manifest declares pairs and the folder holds no captions.
def test_a_pairs_kind_on_a_classification_table_blames_the_manifest_not_a_flag_never_given(coloured_shards, tmp_path):
    folder = rewrite_manifest(coloured_shards, tmp_path / "out", sample_kind="pairs")
    with pytest.raises(DataioError) as caught:
        dataio.DataLoader(folder, batch_size=4)
    message = str(caught.value)
    assert "sample_kind" in message or "declares" in message, message
    assert not message.startswith("captions "), message
    err = one_line_refusal(run_cli("train", "--train", str(folder), "--epochs", "1", "--out", str(tmp_path / "run"),
                                   "--device", "cpu", cwd=tmp_path))
    assert "--captions" not in err, err  # dataio train has no --captions flag


# Class 8: an image folder declared "tokens" is refused as "holds 'images' shards in format None, not Arrow token
# shards": the manifest's own declaration (the contradiction) is not named, and "format None" is noise.
def test_an_image_folder_declared_tokens_names_the_declaration(coloured_shards, tmp_path):
    folder = rewrite_manifest(coloured_shards, tmp_path / "out", sample_kind="tokens")
    with pytest.raises(DataioError) as caught:
        dataio.DataLoader(folder, batch_size=4)
    message = str(caught.value)
    assert "format None" not in message, message
    assert "sample_kind" in message or KINDS["tokens"].what in message, message
