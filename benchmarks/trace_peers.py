"""Comparison: what losslint 0.4.1, trainproof 0.22, gradsnitch 0.1.0 and ``datacheck trace`` report on the
same training logs (the peers' own planted demos and gallery, and ../shared/logs), as a markdown table:
per log the planted truth, and per tool its first bad step (where the tool names one) and its finding
or class. The peers run in their own virtual environment (never the project's), given with --peers:

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install losslint==0.4.1 trainproof==0.22 gradsnitch==0.1.0
    python benchmarks/trace_peers.py --peers /tmp/peers [--out table.md]

Each tool reads the logs in the form it reads: its own demo files natively; a text log it cannot parse
(Megatron, nanoGPT, mmengine lines) as the CSV of the values datacheck read from it (step, loss,
val_loss, grad_norm, lr), so the rules are compared, not the parsers; gradsnitch (a pandas DataFrame
linter) always gets that CSV, its planted runs as its own ``_synthetic`` DataFrame writes them.
Findings at info level (and trainproof's INFO) are left out of "first": the table compares warnings
and errors.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT))

import peerlogs  # noqa: E402

from datacheck.trace import TraceOptions, open_log, parse_spike_rule, trace_logs  # noqa: E402
from datacheck.trace.verdict import build_verdict  # noqa: E402

SHARED = ROOT.parent / "shared" / "logs"

#: log -> the planted (or documented, PROVENANCE.md) truth: first bad step and what it is
TRUTH = {
    "losslint/healthy.csv": "clean",
    "losslint/nan.jsonl": "30 NaN",
    "losslint/diverging.csv": "rises from the start (divergence)",
    "losslint/spike.jsonl": "15 spike (25.0)",
    "losslint/trainer_state.json": "eval logged under step 7 (metric); eval rises from 36 (overfit, min at 32)",
    "gradsnitch/clean": "clean", "gradsnitch/nan": "250 NaN", "gradsnitch/spike": "200 grad spike, loss 201-209",
    "gradsnitch/overfit": "200 val rises (overfit)", "gradsnitch/plateau": "dead run (stagnation)",
    "gradsnitch/diverge": "200 rise (divergence)", "gradsnitch/vanish": "grad norm -> 0, loss flat",
    "gradsnitch/osc": "growing oscillation", "gradsnitch/lrdead": "200 lr 0 (scheduler too short)",
    "gradsnitch/cosine": "clean (cosine to 0)", "gradsnitch/healthy_osc": "clean (constant oscillation)",
    "trainproof/healthy": "clean (warmup, cosine to ~0)", "trainproof/lr_hot": "10 lr x100 (divergence)", "trainproof/lr_zero": "5 lr 0 on every step",
    "trainproof/fp16_nan": "20 inf grad norm (transient), then divergence from 25",
    "shared/megatron/meg_ds_3d_gpt2_perf_n16-ds-off.out": "3 spike (12.44 -> 44.24); back to 11.65 at 31, then rises to 20.44 (divergence)",
    "shared/megatron/meg_gpt2_base_n4-1809579.out": "clean after the fp16 scale search",
    "shared/megatron/meg_gpt2_perf_n16.out": "no loss (every step skipped, scale search)",
    "shared/nanogpt/output.log": "1750 overfit (eval min 2.1041)",
    "shared/issues/gradnorm_tf_17_epoch_loss_nan.txt": "3451 NaN (persistent)",
    "shared/issues/xtuner_187_mmengine_grad_norm_nan.txt": "231..240 NaN grad norm",
    "shared/issues/modernbert_233_hf_trainer_grad_norm_nan.txt": "0 NaN grad norm; loss 0.0 hidden NaN",
    "shared/issues/megatron_llm_33_nan_loss_counters_zero.txt": "3385 loss missing (suspected NaN)",
    "shared/issues/mlx_examples_620_lora_loss_spike.txt": "75 divergence (1.406 -> 3.316 -> 6.437)",
    "shared/issues/apex_834_loss_scale_to_zero.txt": "loss scale collapse (32768 -> 0.5)",
    "shared/issues/chinese_llama_alpaca_534_deepspeed_overflow_scale_collapse.txt": "378 loss scale collapse",
    "shared/issues/deepspeed_931_overflow_hysteresis.txt": "overflow with hysteresis (scale 65536 -> 8192)",
}

_GS = r"""
import json, sys, pandas as pd, gradsnitch
df = pd.read_csv(sys.argv[1])
print(json.dumps([{"code": f.code, "name": f.name, "severity": f.severity, "evidence": f.evidence}
                  for f in gradsnitch.lint(df)]))
"""


def _materials(tmp: Path) -> dict[str, dict[str, Path]]:
    """log name -> {"native": file, "flat": CSV of datacheck's values, "gs": gradsnitch's CSV}."""
    out: dict[str, dict[str, Path]] = {}
    for n, p in peerlogs.losslint_demo(tmp / "losslint").items():
        out[f"losslint/{n}"] = {"native": p}
    for k in peerlogs.GRADSNITCH_KINDS:
        out[f"gradsnitch/{k}"] = {"native": peerlogs.gradsnitch_csv(k, tmp / "gradsnitch" / f"{k}.csv"),
                                  "gs": peerlogs.gradsnitch_csv(k, tmp / "gs" / f"{k}.csv", split_eval=False)}
    for g in ("healthy", "lr_hot", "lr_zero", "fp16_nan"):
        out[f"trainproof/{g}"] = {"native": peerlogs.trainproof_gallery(g, tmp / "trainproof" / g / "trainer_state.json")}
    for f in sorted(SHARED.glob("*/*")):
        if f.suffix in (".md", ".yaml", ".json"):
            continue
        out[f"shared/{f.parent.name}/{f.name}"] = {"native": f, "text": f}
    for name, m in out.items():
        m["flat"] = _flat(m["native"], tmp / "flat" / (name.replace("/", "_") + ".csv"))
    return out


def _flat(path: Path, out: Path) -> Path:
    """The values datacheck reads from ``path`` as a CSV (eval on the train row of the same or the
    previous step; an eval before any train record on the first train row). A train record without a
    loss (Megatron's line when every iteration was skipped) is a row with an empty loss."""
    rows: dict[int, dict[str, float | None]] = {}
    last = None
    pending = None  # an eval before any train record waits for the first one
    for r in open_log(str(path)).records():
        if r.split == "eval":
            tgt = rows.get(r.step) or (rows.get(last) if last is not None else None)
            if tgt is None:
                pending = r.loss
            else:
                tgt["val_loss"] = r.loss
            continue
        rows[r.step] = {"step": r.step, "loss": r.loss, "grad_norm": r.grad_norm, "lr": r.lr}
        if pending is not None:
            rows[r.step]["val_loss"], pending = pending, None
        last = r.step
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "loss", "val_loss", "grad_norm", "lr"])
        for s in sorted(rows):
            d = rows[s]
            w.writerow([s] + [("" if d.get(k) is None else (str(d[k]) if math.isfinite(d[k]) else str(d[k])))  # type: ignore[arg-type]
                              for k in ("loss", "val_loss", "grad_norm", "lr")])
    return out


def _step_in(text: str) -> int | None:
    m = re.search(r"(?:at|by|after|since|first steps?:?) step (\d+)|steps?:? (\d+)", text)
    return int(next(g for g in m.groups() if g)) if m else None


def _losslint(bin_: Path, path: Path) -> str:
    r = subprocess.run([str(bin_ / "losslint"), "check", str(path), "--format", "json"], capture_output=True, text=True)
    try:
        fs = [f for f in json.loads(r.stdout)["findings"] if f["severity"] in ("error", "warning")]
    except (json.JSONDecodeError, KeyError):
        return "cannot read"
    if not fs:
        return "-"
    parts = []
    for f in fs:
        d = f.get("details") or {}
        step = (d.get("steps") or [None])[0] if d.get("steps") else d.get("since_step")
        parts.append(f"{f['check']}" + (f" @{step}" if step is not None else ""))
    return ", ".join(parts)


def _trainproof(bin_: Path, path: Path) -> str:
    r = subprocess.run([str(bin_ / "trainproof"), "doctor", str(path), "--json"], capture_output=True, text=True)
    try:
        reps = json.loads(r.stdout)["reports"]
    except (json.JSONDecodeError, KeyError):
        return "cannot read"
    fs = [f for rep in reps for f in rep.get("findings", []) if f.get("level") in ("FAIL", "WARN")]
    if not fs:
        return "-"
    return ", ".join(f"{f['id']}" + (f" @{_step_in(f.get('evidence', ''))}" if _step_in(f.get("evidence", "")) else "")
                     for f in fs)


def _gradsnitch(bin_: Path, path: Path) -> str:
    r = subprocess.run([str(bin_ / "python"), "-c", _GS, str(path)], capture_output=True, text=True)
    try:
        fs = json.loads(r.stdout)
    except json.JSONDecodeError:
        return "cannot read"
    if not fs:
        return "-"
    return ", ".join(f"{f['code']} {f['name'].split(' (')[0]}" + (f" @{_step_in(f['evidence'])}" if _step_in(f["evidence"])
                                                                    else "") for f in fs)


def _datacheck(path: Path) -> str:
    res = trace_logs([open_log(str(path))], TraceOptions(spike=parse_spike_rule("robust")))
    v = build_verdict(res, None)
    if not v["anomalies"]:
        return "-"
    parts = []
    for a in v["anomalies"][:3]:
        at = f" @{a['step']}" if a["step"] is not None else ""
        parts.append(f"{a['class']}: {a['check'].removeprefix('log.')}{at}")
    more = len(v["anomalies"]) - 3
    return ", ".join(parts) + (f" (+{more})" if more > 0 else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", required=True, type=Path, help="the virtual environment holding the three peers")
    ap.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = ap.parse_args()
    bin_ = args.peers / "bin"
    lines = ["| log | truth | losslint 0.4.1 | trainproof 0.22 | gradsnitch 0.1.0 | datacheck (class: check @step) |",
             "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as td:
        for name, m in _materials(Path(td)).items():
            native_ok = "text" not in m
            ll = _losslint(bin_, m["native"] if native_ok else m["flat"])
            tp = _trainproof(bin_, m["native"] if native_ok else m["flat"])
            gs = _gradsnitch(bin_, m.get("gs", m["flat"]))
            dc = _datacheck(m["native"])
            lines.append(f"| {name} | {TRUTH.get(name, '?')} | {ll} | {tp} | {gs} | {dc} |")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
