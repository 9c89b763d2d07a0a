"""The new user's tiny run, as a JSONL log and its data: 302 rows, batch 8, unshuffled (step ``s``
trains rows ``8 (s - 1) .. 8 s - 1``), the loss 1.651 at step 1 then flat 1.95 + N(0, 0.17), NaN at step
38, whose batch holds a row with a NaN feature. The flat noisy loss was flagged ``log.divergence`` at
step 2, the first anomaly: ``--data`` audited step 2's rows ("look sound") and never the NaN's. Expected
rows computed here from the batching, never read back from datacheck."""
from __future__ import annotations

import numpy as np
from realruns import place, trace_json, write_shards
from tracehelp import write_jsonl

N, B, SIZES, NAN_STEP = 302, 8, (100, 100, 102), 38
BAD = 298  # in step 38's batch: rows 296..301


def test_the_nan_step_is_the_first_answer_and_its_rows_are_audited(tmp_path):
    rng = np.random.default_rng(16)  # flagged at step 2 before (band top 1.816, the 10% floor over 1.651)
    loss = [1.651] + (1.95 + rng.normal(0, 0.17, NAN_STEP - 2)).tolist() + [float("nan")]
    log = write_jsonl(tmp_path / "metrics.jsonl", [{"step": i + 1, "loss": v, "lr": 5e-5} for i, v in enumerate(loss)])
    rows = [{"x1": (i % 17) / 17, "x2": (i % 5) / 5, "label": i % 3} for i in range(N)]
    rows[BAD]["x1"] = float("nan")
    write_shards(tmp_path / "data", rows, SIZES)
    (tmp_path / "datacheck.toml").write_text('[columns]\nfeatures = ["x1", "x2"]\nlabel = "label"\n'
                                             f"[batch]\nbatch_size = {B}\nshuffle = false\nloader = \"torch\"\n")
    rc, res, err = trace_json(str(log), "--first-step", "1", "--data", str(tmp_path / "data"),
                              "--config", str(tmp_path / "datacheck.toml"))
    assert rc == 1, err
    assert (res["first_bad"]["check"], res["first_bad"]["step"]) == ("log.non_finite", NAN_STEP)
    steps = res["data"]["rows"]["steps"]
    assert sorted(int(r) for g in steps[str(NAN_STEP)].values() for r in g) == \
        list(range(B * (NAN_STEP - 1), min(N, B * NAN_STEP)))
    assert res["data"]["rows"]["row_checks"] == {str(BAD): ["finite.nan:x1"]}
    shard, row = place(BAD, SIZES)
    loc = res["data"]["rows"]["failing_rows"][0]
    assert (loc["shard"], loc["shard_row"], loc["row"]) == (shard, row, BAD)
