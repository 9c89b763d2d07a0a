"""``datacheck schema infer`` asks for ``[dataset] layout = X`` only when the config it proposes does not
already make the audit take the rows as X (its ``[dataset] schema`` names X, or a layout the audit
refines into X: :meth:`LayoutProposal.gives_rows`). It said "state it with [dataset] layout" even when
the proposed contract named the layout.

Material: GLUE SST-2 (Vietnamese) test split (../shared/realdata/sst2_vi_glue_parquet: sentence, label,
idx; PROVENANCE.md) and KTO rows (prompt, completion, a Boolean label: no built-in contract)."""
from __future__ import annotations

import shutil
import tomllib

import polars as pl
import pytest
from conftest import REALDATA, run_cli

from datacheck.derive.layout import REFINES
from datacheck.model.layouts import Layout
from datacheck.tools.infer import LayoutProposal

SST2 = REALDATA / "sst2_vi_glue_parquet" / "test-00000-of-00001.parquet"


def _proposed_toml(yaml_text: str) -> dict:
    lines = [ln[4:] for ln in yaml_text.splitlines() if ln.startswith("#   ") and not ln.startswith("#   the ")]
    return tomllib.loads("\n".join(lines))


def test_no_layout_line_when_the_proposed_schema_names_the_layout(tmp_path):
    if not SST2.is_file():
        pytest.skip("../shared/realdata is not present")
    (tmp_path / "data").mkdir()
    shutil.copy(SST2, tmp_path / "data" / "test.parquet")
    r = run_cli("schema", "infer", str(tmp_path / "data"), "-o", str(tmp_path / "s.yaml"))
    assert r.returncode == 0, r.stderr
    proposed = _proposed_toml((tmp_path / "s.yaml").read_text())
    assert proposed["dataset"]["schema"] == "text_classification"
    assert "recognizes the rows as text_classification" in r.stderr
    assert "state it with [dataset] layout" not in r.stderr
    assert 'the proposed [dataset] schema = "text_classification" gives it' in r.stderr


def test_the_layout_line_stays_where_no_contract_gives_the_layout(tmp_path):
    (tmp_path / "data").mkdir()
    pl.DataFrame({"prompt": ["a", "b"], "completion": ["c", "d"], "label": [True, False]}).write_parquet(
        tmp_path / "data" / "k.parquet")
    r = run_cli("schema", "infer", str(tmp_path / "data"), "-o", str(tmp_path / "k.yaml"))
    assert r.returncode == 0, r.stderr
    assert 'recognizes the rows as kto' in r.stderr and 'state it with [dataset] layout = "kto"' in r.stderr


@pytest.mark.parametrize("layout, rows, gives", [
    ("text_classification", "text_classification", True),
    ("causal_lm", "sft_tokenized", True),       # the audit refines causal_lm rows that hide prompts
    ("packed_lm", "packed_sft", True),
    ("causal_lm", "dpo", False),
    (None, "kto", False),
])
def test_gives_rows_follows_the_audits_refinement(layout, rows, gives):
    assert (rows == layout or rows in REFINES.get(layout or "", ())) == gives  # the audit's rule, restated
    p = LayoutProposal(layout=layout, why="", rows=Layout(rows, "recognized", ""))
    assert p.gives_rows() is gives
