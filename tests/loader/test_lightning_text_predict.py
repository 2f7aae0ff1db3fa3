"""Lightning ``predict`` over a text loader shared with validation counts each of 41 documents once on 2 ranks,
as torch's loader with Lightning's ``UnrepeatedDistributedSampler`` (it counted a padding batch: the text loader
padded its shares as for validation). The run: lightning_predict_script.py's ``text`` over ``forty_one_documents``
(the session's one launch, tests/loader/predict_fixtures.py)."""

from __future__ import annotations

from collections import Counter

DOCUMENTS = 41


def test_lightning_predict_over_a_shared_text_loader_reads_each_document_once(lightning_predict):
    stderr = lightning_predict["stderr"]
    assert "Traceback" not in stderr and "reads all" not in lightning_predict["before_stages"], stderr[-3000:]
    records = [r["text"] for r in lightning_predict["records"]]
    predicted = [i for r in records for i in r["read"]["predict"]]
    assert sum(r["predictions"] for r in records) == DOCUMENTS  # before: 45, a padding batch of 4 repeats
    assert Counter(predicted) == Counter(range(DOCUMENTS))  # each document once, no padding repeat
    validated = [i for r in records for i in r["read"]["validate"]]  # validation: padded shares, every document
    assert Counter(i for i in validated if i >= 0) == Counter(range(DOCUMENTS)) and len(validated) > DOCUMENTS
