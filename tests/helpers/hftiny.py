"""The tiny model and map-style dataset of the real Hugging Face ``Trainer`` CPU runs (tests/e2e/trace and
the launched helpers hfresume.py, hftrainer_ddp.py): each sample is ``{"x": float32 (2,), "labels": int64,
"idx": int64}`` (``idx`` the row id), the model a linear layer over ``x`` returning the mean
cross-entropy and the logits, its forward handing the row ids of every micro-batch it trains to a
callback. torch is imported by the caller (a test after ``pytest.importorskip("torch")``, a helper in its
``main``) and passed in: importing this module needs neither torch nor transformers."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def row_dataset(torch: Any, x: Any, y: Any, n: int | None = None, sizes: Sequence[int] | None = None) -> Any:
    """A ``torch.utils.data.Dataset`` of the rows ``x`` (float32, (rows, 2)) and ``y`` (int64 labels): sample
    ``i`` is ``{"x": x[i], "labels": y[i], "idx": tensor(i)}``. Its length is its attribute ``n`` (``n``,
    default every row; a test may change it between epochs). With ``sizes`` it also has ``set_epoch(e)``
    (accelerate's ``DataLoaderShard.set_epoch`` calls it before each epoch), which sets ``n = sizes[e]``;
    without, it has no ``set_epoch`` at all."""

    class Rows(torch.utils.data.Dataset):
        def __init__(self):
            self.n = len(x) if n is None else n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return {"x": x[i], "labels": y[i], "idx": torch.tensor(i)}

    if sizes is None:
        return Rows()

    class SizedRows(Rows):
        def set_epoch(self, epoch):
            self.n = sizes[epoch]

    data = SizedRows()
    data.n = sizes[0] if n is None else n
    return data


def linear_model(torch: Any, record: Callable[[list[int]], None], classes: int = 2) -> Any:
    """A ``torch.nn.Module``: ``Linear(2, classes)`` over ``x``; ``forward(x, labels, idx)`` calls
    ``record(idx.tolist())`` (the micro-batch's row ids) and returns ``{"loss": mean cross-entropy,
    "logits": (batch, classes)}``."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, classes)

        def forward(self, x, labels, idx):
            record(idx.tolist())
            out = self.lin(x)
            return {"loss": torch.nn.functional.cross_entropy(out, labels), "logits": out}

    return Model()
