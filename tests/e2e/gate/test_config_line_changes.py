"""The text output's config line, when no config file is given, names what changed the defaults on
the real data of ../shared/realdata (PROVENANCE.md): the splits the Hub's file names give and the
classes a ``ClassLabel`` declares (SST-2's ``{split}-00000-of-00001.parquet`` with glue's
``huggingface`` metadata), a ``DatasetDict``'s declared splits (dkhate's mBERT ``save_to_disk``
folder), ``--schema``. It listed every possibility ("--schema, a DatasetDict's declared splits, the
splits the Hub's file names give, the classes the data's ClassLabel declares or a config given in
memory") whatever had happened, on every Hub-named folder audited without a config."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import REALDATA, run_cli

SST2 = REALDATA / "sst2_vi_glue_parquet"
MBERT = REALDATA / "dkhate_danish_offensive/dkhate_mbert"


def _line(tmp_path, *args: str) -> str:
    res = run_cli("audit", *args, "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert res.returncode in (0, 1), res.stderr
    return next(line for line in res.stdout.splitlines() if line.startswith("config: "))


@pytest.mark.skipif(not SST2.is_dir(), reason="shared SST-2 not present")
def test_hub_names_and_classlabel_are_named(tmp_path):
    meta = json.loads(pq.read_schema(SST2 / "train-00000-of-00001.parquet").metadata[b"huggingface"])
    assert meta["info"]["features"]["label"]["_type"] == "ClassLabel"  # the classes the data declares
    assert _line(tmp_path, str(SST2)).startswith(
        "config: none (the defaults changed by the splits the Hub's file names give and the classes the data's "
        "ClassLabel declares); [labels] classes = the 2 ClassLabel names of 'label'")


@pytest.mark.skipif(not MBERT.is_dir(), reason="shared dkhate not present")
def test_a_datasetdicts_splits_are_named(tmp_path):
    assert json.loads((MBERT / "dataset_dict.json").read_text())["splits"] == ["train", "test"]
    assert _line(tmp_path, str(MBERT)) == "config: none (the defaults changed by a DatasetDict's declared splits)"


@pytest.mark.skipif(not MBERT.is_dir(), reason="shared dkhate not present")
def test_schema_and_splits_together_are_both_named(tmp_path):
    assert _line(tmp_path, str(MBERT), "--schema", "text_classification") == (
        "config: none (the defaults changed by --schema and a DatasetDict's declared splits)")


@pytest.mark.skipif(not SST2.is_dir(), reason="shared SST-2 not present")
def test_a_single_files_classlabel_alone_is_named(tmp_path):
    one = SST2 / "validation-00000-of-00001.parquet"  # one file: no split; its ClassLabel fills the classes
    assert _line(tmp_path, str(one)).startswith(
        "config: none (the defaults changed by the classes the data's ClassLabel declares)")
