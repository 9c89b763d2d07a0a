"""The peers' planted training logs, rebuilt or vendored (all three peers are MIT licensed):

- losslint 0.4.1 ``losslint demo``: its five deterministic demo logs, rebuilt here from the formulas of
  ``losslint/demo.py`` (healthy.csv, nan.jsonl, diverging.csv, spike.jsonl, trainer_state.json);
- gradsnitch 0.1.0 ``_synthetic(kind)``: its planted runs (400 steps, numpy ``default_rng(0)``), rebuilt
  from ``gradsnitch/__init__.py`` and written as CSV (step, loss, val_loss, grad_norm, lr);
- trainproof 0.22 ``examples/gallery``: four real QLoRA ``trainer_state.json`` runs, vendored in
  ``tests/data/trace/trainproof_gallery.json`` (rounded; the summary entry kept as written).

Used by the trace tests and by ``benchmarks/trace_peers.py`` (the comparison table).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
GALLERY = HERE.parent / "data" / "trace" / "trainproof_gallery.json"

GRADSNITCH_KINDS = ("clean", "nan", "spike", "overfit", "plateau", "diverge", "vanish", "osc", "lrdead", "cosine",
                    "healthy_osc")


def _fmt(v: float) -> str:
    return f"{v:.6f}"


def losslint_demo(out: Path) -> dict[str, Path]:
    """losslint's demo logs (``losslint/demo.py``), written into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    lines = ["step,loss,eval_loss"]
    ev = 1.9
    for i in range(60):
        cell = _fmt(ev) if i % 6 == 5 else ""
        if i % 6 == 5:
            ev *= 0.9
        lines.append(f"{i * 10},{_fmt(2.0 * 0.96 ** i + 0.02)},{cell}")
    files["healthy.csv"] = "\n".join(lines) + "\n"
    files["nan.jsonl"] = "".join(json.dumps({"step": i, "loss": float("nan") if i == 30 else 1.8 * 0.95 ** i}) + "\n"
                                 for i in range(40))
    files["diverging.csv"] = "step,loss\n" + "".join(f"{i * 10},{_fmt(1.0 + 0.03 * i)}\n" for i in range(40))
    files["spike.jsonl"] = "".join(json.dumps({"step": i, "loss": 25.0 if i == 15 else 1.5 * 0.97 ** i}) + "\n"
                                   for i in range(30))
    hist: list[dict] = []
    sched = {4 * (k + 1): k for k in range(12)}
    for i in range(50):
        hist.append({"step": i, "loss": 2.0 * 0.95 ** i, "lr": 1e-3})
        if i in sched:
            k = sched[i]
            e = 1.9 * 0.93 ** k if k < 8 else [1.2, 1.35, 1.55, 1.8][k - 8]
            hist.append({"step": 7 if i == 40 else i, "eval_loss": e})
    files["trainer_state.json"] = json.dumps({"log_history": hist, "best_metric": 1.147})
    paths = {}
    for name, text in files.items():
        (out / name).write_text(text)
        paths[name] = out / name
    return paths


def gradsnitch_synthetic(kind: str, n: int = 400) -> dict[str, list[float]]:
    """gradsnitch's ``_synthetic(kind)`` columns (step, train_loss, grad_norm, lr, val_loss)."""
    import numpy as np

    rng = np.random.default_rng(0)
    step = np.arange(n)
    loss = 3.0 * np.exp(-step / 120) + 0.3 + rng.normal(0, 0.02, n)
    grad = np.abs(rng.normal(1.0, 0.2, n))
    lr = np.full(n, 3e-4)
    val = loss + 0.05
    if kind == "nan":
        loss[250:] = np.nan
    elif kind == "spike":
        grad[200] = 30.0
        loss[201:210] += 1.5
    elif kind == "overfit":
        val[200:] = val[200] + (step[200:] - 200) * 0.002
    elif kind == "plateau":
        loss = 2.8 + rng.normal(0, 0.02, n)
        val = loss + 0.05
    elif kind == "diverge":
        base = 3.0 * np.exp(-step / 120) + 0.3
        base[200:] = base[200] + (step[200:] - 200) * 0.01
        loss = base + rng.normal(0, 0.02, n)
        val = loss + 0.05
    elif kind == "vanish":
        loss = 2.8 + rng.normal(0, 0.02, n)
        val = loss + 0.05
        grad = np.abs(1.0 * np.exp(-step / 40) + rng.normal(0, 0.005, n))
    elif kind == "osc":
        loss = 1.0 + (0.05 + step / n * 0.9) * np.sin(step / 3) + rng.normal(0, 0.02, n)
        val = loss + 0.05
    elif kind == "lrdead":
        half = n // 2
        lr = np.where(step < half, 3e-4 * (1 - step / half), 0.0)
        loss = np.where(step < half, 3.0 * np.exp(-step / 60) + 0.3, 0.3) + rng.normal(0, 0.01, n)
        val = loss + 0.05
    elif kind == "cosine":
        lr = 3e-4 * 0.5 * (1 + np.cos(np.pi * step / n))
        val = loss + 0.05
    elif kind == "healthy_osc":
        loss = 1.0 + 0.2 * np.sin(step / 3) + rng.normal(0, 0.02, n)
        val = loss + 0.05
    return {"step": step.tolist(), "train_loss": loss.tolist(), "grad_norm": grad.tolist(), "lr": lr.tolist(),
            "val_loss": val.tolist()}


def _num(x: float) -> str:
    return "nan" if math.isnan(x) else repr(x)


def gradsnitch_csv(kind: str, out: Path, split_eval: bool = True) -> Path:
    """gradsnitch's planted run ``kind`` as a CSV (``step,loss,val_loss,grad_norm,lr``). ``split_eval``:
    the eval loss on rows of its own (as Lightning's CSVLogger and the Trainer write it; datacheck reads
    one record per row); otherwise on the train rows (gradsnitch's own DataFrame)."""
    d = gradsnitch_synthetic(kind)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = ["step,loss,val_loss,grad_norm,lr"]
    for s, lo, v, g, lr in zip(d["step"], d["train_loss"], d["val_loss"], d["grad_norm"], d["lr"]):
        if split_eval:
            rows.append(f"{s},{_num(lo)},,{g!r},{lr!r}")
            rows.append(f"{s},,{_num(v)},,")
        else:
            rows.append(f"{s},{_num(lo)},{_num(v)},{g!r},{lr!r}")
    out.write_text("\n".join(rows) + "\n")
    return out


def trainproof_gallery(name: str, out: Path) -> Path:
    """A trainproof gallery run as a ``trainer_state.json`` (the Trainer's layout, summary entry last)."""
    g = json.loads(GALLERY.read_text())[name]
    hist: list[dict] = [{"epoch": round(s / 150, 4), "grad_norm": float(gn) if not isinstance(gn, str) else math.inf,
                         "learning_rate": lr, "loss": loss, "step": s} for s, loss, gn, lr in g["rows"]]
    hist.append({"epoch": 2.0, **g["summary"]})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"global_step": 300, "log_history": hist, "logging_steps": 5, "max_steps": 300},
                              indent=2, sort_keys=True))
    return out
