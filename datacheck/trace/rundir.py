"""A training run's output folder given as a LOG: what ``datacheck trace OUTPUT_DIR/`` reads in it.

A folder that holds a Hugging Face ``trainer_state.json`` (its own, written by ``Trainer.save_state``
or :class:`datacheck.torch.hf.DatacheckCallback`, else the one of its latest ``checkpoint-<N>/``,
the highest ``N``) is read as that file; when it also holds a ledger (``data-indices/rank<R>.tsv[.gz]``,
as ``record_batches`` and the callback write it) and ``--ledger`` is not given, the folder is the
ledger. Any other folder is left as it is (a TensorBoard log folder).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RunDir", "expand_run_dirs", "trainer_state_of"]

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_RANK_FILE = re.compile(r"^rank\d+\.tsv(\.gz)?$")


@dataclass
class RunDir:
    """What the LOG arguments become.

    Attributes:
        logs: the LOG paths, each run folder replaced by its ``trainer_state.json``.
        ledger: the ``--ledger`` folder: the one given, else a run folder holding ``data-indices/``
            (only when the trace has ``--data``), else None.
        found: one line per run folder read, saying which files were taken.
    """

    logs: list[str]
    ledger: str | None
    found: list[str] = field(default_factory=list)


def trainer_state_of(folder: Path) -> Path | None:
    """The ``trainer_state.json`` of a Trainer output folder: its own, else the latest checkpoint's."""
    own = folder / "trainer_state.json"
    if own.is_file():
        return own
    ckpts = [(int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := _CHECKPOINT.match(p.name))
             and (p / "trainer_state.json").is_file()]
    return max(ckpts)[1] / "trainer_state.json" if ckpts else None


def _has_ledger(folder: Path) -> bool:
    d = folder / "data-indices"
    return d.is_dir() and any(_RANK_FILE.match(p.name) for p in d.iterdir())


def expand_run_dirs(paths: list[str], ledger: str | None, with_data: bool) -> RunDir:
    """Replace each Trainer output folder among ``paths`` by its ``trainer_state.json``, and take the
    first such folder holding a ledger as ``ledger`` when none is given and ``with_data``."""
    out = RunDir(logs=[], ledger=ledger)
    for raw in paths:
        p = Path(raw)
        state = trainer_state_of(p) if p.is_dir() else None
        if state is None:
            out.logs.append(raw)
            continue
        out.logs.append(str(state))
        line = f"{raw}: a Trainer output folder; read {state.relative_to(p).as_posix()}"
        if out.ledger is None and with_data and _has_ledger(p):
            out.ledger = str(p)
            line += " and the ledger in data-indices/"
        out.found.append(line)
    return out
