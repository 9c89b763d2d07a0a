"""labels.unexpected_sentinel on a -1/+1 class label (SVM-style y): -1 is a class there, so the advice
to set ignore_index or drop the rows would throw a class away; the message says it is a -1/+1 binary
encoding and to map it to 0/1. Any other set of values keeps the ignore_index advice."""
from __future__ import annotations

import pytest
from batchhelp import batch_rows
from checkhelp import audit_df, one

DROP = "or drop these rows"
PLUS_MINUS = "a -1/+1 binary encoding"


@pytest.mark.parametrize("rows_a_batch", [None, 3])
@pytest.mark.parametrize("frame", [
    {"f0": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "label": [-1, 1, 1, -1, 1, 1, 1]},  # tabular
    {"text": ["a", "b", "c", "d", "e", "f", "g"], "label": [1, 1, 1, -1, 1, -1, 1]},  # text classification
    {"f0": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], "label": [-1, 1, 1, -1, 1, 1, None]},  # a null: labels.null's
])
def test_minus_one_plus_one_labels_are_a_binary_encoding(tmp_path, frame, rows_a_batch):
    labels = frame["label"]
    minus = [i for i, v in enumerate(labels) if v == -1]
    with batch_rows(rows_a_batch):
        f = one(audit_df(tmp_path, frame), "labels.unexpected_sentinel", "label")
    assert f.rows == tuple(minus)
    assert PLUS_MINUS in f.message and "Map the labels to 0/1" in f.message and DROP not in f.message


@pytest.mark.parametrize("rows_a_batch", [None, 3])
@pytest.mark.parametrize("labels", [
    [-1, 1, 0, -1, 1, 1, 1],  # a third class 0: -1 may well be a sentinel
    [-1, 2, 2, -1, 2, 2, 2],  # -1 and 2
    [-2, 1, 1, -1, 1, 1, 1],  # two negative values
])
def test_other_label_sets_keep_the_ignore_index_advice(tmp_path, labels, rows_a_batch):
    frame = {"f0": [0.1 * i for i in range(len(labels))], "label": labels}
    with batch_rows(rows_a_batch):
        f = one(audit_df(tmp_path, frame), "labels.unexpected_sentinel", "label")
    assert f.rows == tuple(i for i, v in enumerate(labels) if v < 0)
    assert DROP in f.message and PLUS_MINUS not in f.message
