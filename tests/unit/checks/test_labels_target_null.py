"""``labels.null`` on a regression target: a row whose target is missing (an empty CSV cell, a JSON
null) has no label; the loss turns it into NaN. It passed silently: ``labels.null`` judged only the
``label``/``labels`` roles, and a float ``label`` (or ``[columns] target``) is the ``target`` role.
A NaN target stays ``finite.nan`` only."""
from __future__ import annotations

import numpy as np
import pytest

import datacheck


def _csv(path, target_name: str, cells: list[str]) -> None:
    rng = np.random.default_rng(1)
    lines = [f"x1,x2,{target_name}"]
    for c in cells:
        lines.append(f"{rng.normal():.4f},{rng.normal():.4f},{c}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("name, cfg", [("label", {}), ("price", {"columns": {"target": ["price"]}})])
def test_a_missing_regression_target_is_labels_null_at_its_row(tmp_path, name, cfg):
    cells = [f"{v:.2f}" for v in np.linspace(0.5, 4.5, 12)]
    cells[3] = ""       # missing
    cells[8] = "NaN"    # not a number: finite.nan, not labels.null
    _csv(tmp_path / "train.csv", name, cells)
    rep = datacheck.audit([str(tmp_path / "train.csv")], config=cfg)
    assert rep.shards[0].layout == "regression"
    got = {f.check: (f.column, list(f.rows), list(f.lines)) for f in rep.findings}
    missing = [i for i, c in enumerate(cells) if c == ""]
    nan = [i for i, c in enumerate(cells) if c == "NaN"]
    assert got["labels.null"] == (name, missing, [i + 2 for i in missing])  # line 1 is the header
    assert got["finite.nan"][1] == nan


def test_a_complete_target_is_no_finding(tmp_path):
    _csv(tmp_path / "train.csv", "label", [f"{v:.3f}" for v in np.linspace(0, 1, 20)])
    rep = datacheck.audit([str(tmp_path / "train.csv")])
    assert [f.check for f in rep.findings] == []
