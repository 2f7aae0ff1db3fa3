"""An image manifest's class list against its sample table's labels: an empty or short list is refused at open.

The class list sizes the model's output layer (``len(loader.dataset.classes)``):
emptied, every label passed the table checks (there was nothing to compare
them with) and training ended in an IndexError traceback; cut short, every
row past its end was a per-sample error met mid-epoch. Both are one damaged
file, the manifest, and are named as such when the loader, ``ShardDataset`` or
``verify`` opens it.

"Short" is told apart from a few damaged rows (which stay per-sample faults,
skipped under ``on_error="skip"``): the labels past the list's end run on
from it without a gap (every label ``K .. max`` is used, ``K`` the number of
classes), as the rows of the classes cut off do, and as a damaged label
(``12345`` in a table of 4 classes) almost never does. One vectorised pass;
the labels past the end are almost always none.
"""

from __future__ import annotations

import numpy as np


def class_list_problem(classes: tuple[str, ...], labels: np.ndarray, where: str) -> str | None:
    """Why ``where`` (the manifest) cannot be read with these ``classes`` for a table of ``labels``, or None."""
    if not len(labels):
        return None
    if not classes:
        return (f"{where}: lists no classes, but its sample table has {len(labels)} labelled rows (labels up to "
                f"{int(labels.max())}): the class list was emptied; convert again, or restore it")
    past = labels[labels >= len(classes)]
    if not len(past):
        return None
    used = np.unique(past)
    if used[0] != len(classes) or len(used) != int(used[-1]) - len(classes) + 1:
        return None  # a few damaged labels, not a list cut short: per-sample faults (``table_faults``)
    return (f"{where}: lists {len(classes)} classes, but its sample table uses every label up to {int(used[-1])} "
            f"({len(past)} rows past the list): the class list is short; convert again, or restore it")
