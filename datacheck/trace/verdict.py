"""The verdict of ``datacheck trace`` (CHECKS.md "The verdict"): each anomaly in one class, from
deterministic rules, with the evidence it rests on and the next experiment that tells the classes
apart; and the four answers the text output starts with.

Classes: ``numeric`` (non-finite or overflowing values; ``persistent``: no finite loss after it, the
weights are poisoned; ``transient``: the scaler skipped the step and training went on; a grad norm
non-finite on every record under a finite loss: the gradients, not the weights), ``dynamics``
(finite values, the run diverging, stalling, overfitting or spiking), ``metric`` (the logged number is
wrong or missing), ``data`` (with ``--data``: rows with findings in the anomaly's steps), ``resume`` (at
a resume point) and ``rank`` (one rank only).

The rules, in order (the first that applies decides):

``log.skipped_steps`` is left out of the anomalies when a non-finite or loss-scale finding tells the
same event, or when every skip came before the first successful step (the fp16 initial scale search).

1. ``data``: ``--data`` audited the anomaly's steps (the first anomaly's window, or ``--step``) and
   some of those rows fail a check; or periodic spikes whose period is the plan's steps per epoch
   (the epoch's tail batch).
2. ``rank``: a ``log.rank_divergence`` finding names the anomaly's rank (other ranks fine there).
3. ``resume``: the anomaly is a resume-point check (``log.step_regression``, ``log.lr_discontinuity``
   at a resume), or its step lies within :data:`RESUME_NEAR` logged intervals after a resume.
4. otherwise the check's own class (:data:`CLASS_OF`).

Nothing is scored: a class is named with the evidence lines (file, line, values) that put it there.
"""
from __future__ import annotations

from typing import Any

from datacheck.model.catalog import info, is_known
from datacheck.model.findings import Finding
from datacheck.model.order import steps_text
from datacheck.trace.rules import GRAD_LEAD
from datacheck.trace.run import SEVERITY_ORDER, TraceResult
from datacheck.trace.steps import RECORD, as_records

__all__ = ["CLASSES", "CLASS_OF", "RESUME_NEAR", "build_verdict", "verdict_text", "replay_conclusion"]

CLASSES = ("numeric", "dynamics", "metric", "data", "resume", "rank")

#: each log check's class when no other rule applies
CLASS_OF: dict[str, str] = {
    "log.non_finite": "numeric", "log.loss_scale_collapse": "numeric", "log.skipped_steps": "numeric",
    "log.hidden_non_finite": "numeric",
    "log.loss_spike": "dynamics", "log.grad_norm_spike": "dynamics", "log.divergence": "dynamics",
    "log.stagnation": "dynamics", "log.zero_lr": "dynamics", "log.overfit_onset": "dynamics",
    "log.vanishing_grad": "dynamics", "log.periodic_spikes": "dynamics", "log.post_warmup_spike": "dynamics",
    "log.no_loss": "metric", "log.smoothed_loss": "metric", "log.duplicate_steps": "metric",
    "log.lr_per_micro_batch": "metric",
    "log.step_regression": "resume", "log.lr_discontinuity": "resume", "log.rank_divergence": "rank",
}
#: an anomaly within this many logging intervals after a resume point is put in the ``resume`` class
RESUME_NEAR = 5

_REPLAY = ("replay the fixed batch of step {step}{why} (--data ... --export rows.parquet, then "
           "datacheck.torch.replay_batch) in train mode, eval mode and fp32: all fine means mixed precision, "
           "backward or the optimizer; eval bad too means the weights or the input were already bad")
#: the advice for an anomaly logged at the end of a logging interval that the data leg did not place:
#: the first bad step is any of the window's, so one batch (the logged step's) may be a clean one
_REPLAY_WINDOW = ("replay the fixed batches of steps {a}..{b} in order from the checkpoint before step {a} (the "
                  "log's window: the first bad step is one of them; --data ... --step N --export rows.parquet for each, "
                  "then datacheck.torch.replay_batch) in train mode, eval mode and fp32: the first that is not finite "
                  "is the step; all fine means mixed precision, backward or the optimizer; eval bad too means the "
                  "weights or the input were already bad")


def _at(d: dict[str, Any]) -> str:
    """Where the anomaly ``d`` is: ``"step 240"``, or for an anomaly logged at the end of a logging
    interval ``"steps 231..240 (logged every 10: the first bad step is in this window)"``, as answer 1
    and the rule's message say it."""
    w = d.get("window")
    if not w or w[0] == w[1]:
        return f"step {d.get('step')}"
    return f"steps {w[0]}..{w[1]} (logged every {w[1] - w[0] + 1}: the first bad step is in this window)"


def _replay(d: dict[str, Any]) -> str:
    """The replay advice for the anomaly ``d``: of the step whose batch to replay, ``d["replay_step"]``
    (the data leg's: the step whose batch holds the failing rows, or the update before a Lightning
    log's first non-finite loss) with why it is not the anomaly's own step, else of ``d["step"]``; for
    an anomaly logged at the end of a logging interval (``d["window"]`` wider than one step) that the
    data leg did not place, of every step of the window, in order (the logged step's batch alone may
    be clean)."""
    step, rs = d.get("step"), d.get("replay_step")
    if d.get("step_unit") == RECORD:  # no step to replay until a log with step numbers names it
        return _REPLAY.format(step=step, why="").replace(
            f"of step {step}", f"of the step that record {step} logs (this log gives no step number: trace the run's log "
                               "that does, or place its records, to name it)", 1)
    if rs is None or rs == step:
        w = d.get("window")
        if w and w[0] != w[1]:  # logged at the end of an interval: any step of the window may be the bad one
            return _REPLAY_WINDOW.format(a=w[0], b=w[1])
        return _REPLAY.format(step=step, why="")
    return _REPLAY.format(step=rs, why=f" ({d.get('replay_why')})")


def _next(cls: str, f: Finding, d: dict[str, Any]) -> str:
    step, good = d.get("step"), d.get("last_good_step")
    rs = d.get("replay_step", step)
    w = d.get("window")
    windowed = rs in (None, step) and bool(w) and w[0] != w[1]
    if windowed:  # logged at the end of an interval the data leg did not place: the window's first step
        rs = w[0]
    before = f"the checkpoint before step {rs}" + (f" (last good step {good})" if good is not None
                                                   and (rs == step or windowed) else "")
    c = f.check
    if cls == "data":
        rows = d.get("bad_rows") or []
        return (f"drop or fix global rows {rows[:20]} (their shards, rows and findings are listed) and {_replay(d)}; "
                "if the replay without those rows is clean, the data was the cause")
    if cls == "rank":
        return (f"replay rank {d.get('rank')}'s rows of step {step} on another device and compare them with the "
                "other ranks' rows (--ledger gives each rank's rows): the same rows bad everywhere point at data, "
                "only that device at hardware")
    if cls == "resume":
        return ("check the checkpoint the run resumed from (datacheck checkpoint PATH): optimizer, scheduler, scaler "
                "and RNG state must be there for a lossless resume; then resume again from it")
    if cls == "numeric":
        if c == "log.hidden_non_finite":
            return (f"rerun from {before} with logging_nan_inf_filter=False to see the NaN step, then "
                    + _replay(d))
        if d.get("loss_stays_finite"):
            return (f"find the parameter whose gradient is non-finite at {_at(d)} (per-parameter grad norms, or "
                    "torch.autograd.detect_anomaly) and whether the optimizer skips these steps (then nothing is "
                    "trained from the first of them); " + _replay(d))
        if d.get("grad_stays_finite"):
            return ("compute the per-row loss of the step's batch (reduction='none'; a micro-batch whose every label "
                    "is ignored gives 0/0 under a mean), log it with logging_nan_inf_filter on or the loss reset "
                    f"after each log, and {_replay(d)}")
        if d.get("persistent") is False:
            return (f"the value recovered (the scaler skipped the step); if it recurs, {_replay(d)}")
        if c == "log.loss_scale_collapse":
            return (f"resume from {before} in bf16 or fp32 (or a higher min loss scale); if it still overflows at "
                    f"step {step}, {_replay(d)}")
        return f"resume from {before} and {_replay(d)}"
    if cls == "metric":
        if c == "log.no_loss":
            return ("log the loss itself (the trainer's loss key, or --regex naming the loss group): nothing "
                    "about training can be judged from this log")
        if c == "log.duplicate_steps":
            return "fix the step counter of the logger (one record per optimizer step) and read the curves again"
        if c == "log.smoothed_loss":
            return "log the per-step loss (not its running average) to date spikes and onsets"
        return "step the scheduler once per optimizer step (after the grad_accum micro-batches), not per micro-batch"
    if c == "log.overfit_onset":
        return (f"keep the checkpoint of step {d.get('eval_min_step', step)} (the eval minimum); early-stop, add "
                "regularization or data")
    if c == "log.zero_lr":
        return ("size the scheduler to the run's optimizer steps (num_training_steps = steps per epoch x epochs, "
                "after grad_accum) and rerun from the checkpoint before the lr reached 0")
    if c == "log.stagnation":
        return ("check the lr reaches the optimizer and the parameters are trainable (not frozen), then raise the "
                "peak lr; replay a fixed batch to see whether the loss moves at all")
    if c == "log.vanishing_grad":
        return "check the initialization, normalization and activations (dead units), or raise the lr"
    if c == "log.periodic_spikes":
        return ("give --data and [batch] to match the period with the plan (epoch boundaries, tail batches); replay "
                "the batches of the spike steps")
    return (f"lower the peak lr (e.g. by half) and rerun from {before}; if it breaks at the same step again, "
            f"{_replay(d)} (a data cause follows the rows, an lr cause moves)")


def _evidence(f: Finding, d: dict[str, Any]) -> list[dict[str, Any]]:
    ev = d.get("evidence")
    if ev:
        return list(ev)
    line: dict[str, Any] = {"where": d.get("where"), "step": d.get("step")}
    for k in ("value", "loss", "grad_norm", "lr", "loss_scale", "reason", "from_scale", "to_scale", "skipped"):
        if d.get(k) is not None:
            line[k] = d[k]
    out = [line]
    if d.get("last_good_step") is not None:
        out.append({"step": d["last_good_step"], "lr": d.get("last_good_lr"), "loss_scale": d.get("last_good_loss_scale"),
                    "what": "last good step"})
    for r in (d.get("resumes") or [])[:3]:
        out.append({"where": r.get("where"), "step": r.get("to_step"), "from_step": r.get("from_step"), "lr": r.get("lr")})
    return out


def _grad_lead(f: Finding, findings: list[Finding]) -> int | None:
    """The step where the grad norm rose before a loss spike, divergence or post-warmup spike: the
    finding's own ``grad_rise_step`` (the loss-spike and divergence rules date it), else a grad-norm
    spike finding of the same rank within :data:`~datacheck.trace.rules.GRAD_LEAD` steps before it."""
    if f.check not in ("log.loss_spike", "log.divergence", "log.post_warmup_spike") or f.details.get("step") is None:
        return None
    if f.details.get("grad_rise_step") is not None:
        return int(f.details["grad_rise_step"])
    step = f.details["step"]
    for g in findings:
        gs = g.details.get("step")
        if g.check == "log.grad_norm_spike" and g.details.get("rank") == f.details.get("rank") and gs is not None \
                and step - GRAD_LEAD <= gs < step:
            return int(gs)
    return None


def _data_rows(data: dict[str, Any] | None) -> tuple[list[int], list[int] | None, dict[str, list[str]]]:
    """(the audited steps' rows that fail a check, the audited step range, row -> checks)."""
    if not data or not data.get("rows"):
        return [], None, {}
    rc = data["rows"].get("row_checks") or {}
    return sorted(int(r) for r in rc), data.get("audited_steps"), rc


def _row_places(data: dict[str, Any] | None) -> dict[int, tuple[str, int]]:
    """Global row -> (shard path, row in the shard) of the audited rows that fail a check (the data
    result's ``rows.failing_rows``; empty when it has none)."""
    if not data or not data.get("rows"):
        return {}
    return {int(r["row"]): (str(r["shard"]), int(r["shard_row"])) for r in data["rows"].get("failing_rows") or []
            if r.get("shard") is not None and r.get("shard_row") is not None}


def _row_evidence(r: int, row_checks: dict[str, list[str]], located: dict[int, tuple[str, int]]) -> dict[str, Any]:
    """One failing row as evidence: ``row`` (its global index) and ``checks``, with ``shard`` and
    ``shard_row`` when the data result places it."""
    e: dict[str, Any] = {"row": r, "checks": row_checks.get(str(r), [])}
    if r in located:
        e["shard"], e["shard_row"] = located[r]
    return e


def _row_txt(r: int, located: dict[int, tuple[str, int]]) -> str:
    """``SHARD row N (global G)`` for a placed row, else ``row G``."""
    return f"{located[r][0]} row {located[r][1]} (global {r})" if r in located else f"row {r}"


def _classify(f: Finding, res: TraceResult, data: dict[str, Any] | None, bad_rows: list[int],
              audited: list[int] | None, rank_hits: dict[str, int], resumes: list[tuple[int, int]]) -> tuple[str, str]:
    d = f.details
    step = d.get("step")
    if bad_rows and audited and step is not None and audited[0] <= step <= audited[1] and \
            f.check not in ("log.step_regression", "log.no_loss"):
        return "data", (f"global rows {bad_rows[:10]} of the audited steps {audited[0]}..{audited[1]} fail data checks "
                        "(the evidence names each one's shard and row)")
    if f.check == "log.periodic_spikes" and data and (data.get("source") or {}).get("steps_per_epoch"):
        spe = data["source"]["steps_per_epoch"]
        if abs(float(d.get("period", 0)) - spe) <= 1:
            return "data", (f"the spike period {d['period']:g} is the plan's {spe} steps per epoch: the epoch boundary "
                            "(its tail batch: batch.small_tail)")
    rank = d.get("rank")
    if f.check != "log.rank_divergence" and rank in rank_hits and step is not None and abs(rank_hits[rank] - step) <= \
            max(1, (d.get("window") or [step, step])[1] - (d.get("window") or [step, step])[0] + 1):
        return "rank", f"{rank} alone (log.rank_divergence at step {rank_hits[rank]})"
    if f.check in ("log.step_regression", "log.lr_discontinuity") and (f.check == "log.step_regression" or
                                                                         "resumed_from" in d):
        return "resume", "at a resume point"
    if step is not None and f.check not in ("log.step_regression",):
        w = d.get("window") or [step, step]
        for to_step, _ in resumes:  # the anomaly's window width is the log's interval there
            if to_step <= step <= to_step + RESUME_NEAR * max(1, w[1] - w[0] + 1):
                return "resume", f"within {RESUME_NEAR} logging intervals after the resume to step {to_step}"
    cls = CLASS_OF.get(f.check, "dynamics")
    why = {"numeric": "non-finite or overflowing values", "dynamics": "finite values, the run going wrong",
           "metric": "the logged number itself", "resume": "at a resume point", "rank": "one rank"}[cls]
    if f.check == "log.non_finite":
        why += ("; the loss stays finite: the gradients are non-finite, the weights are not poisoned"
                if d.get("loss_stays_finite") else
                "; the grad norm stays finite: the logger carries the NaN loss on, the weights are not poisoned"
                if d.get("grad_stays_finite") else "; persistent: no finite loss after it" if d.get("persistent")
                else f"; transient: finite again from step {d.get('recovered_step')}" if d.get("persistent") is False
                else "; the log ends at it: persistent or transient is not known")
    return cls, why


def replay_conclusion(replay: dict[str, Any]) -> tuple[str | None, str]:
    """What a replay of the bad step's batch (``ReplayResult.to_dict()``: per mode ``finite`` and
    ``bad_rows``) says, as (class or None, text):

    - rows non-finite in every mode that ran, fp32 included: ``data`` (those input rows are bad);
    - train and eval non-finite, fp32 finite: ``numeric`` (the reduced precision overflows);
    - train non-finite only: ``numeric`` (train mode: dropout, batch-norm statistics, or backward);
    - eval (and fp32) non-finite on rows that train mode did not flag: ``numeric`` (the weights given are
      already bad);
    - every mode finite: None (the batch alone does not break these weights: mixed precision in the
      run's backward, the optimizer's update, or weights that differ from the checkpoint given).
    """
    modes = replay.get("modes") or {}
    fin = {m: bool(r.get("finite")) for m, r in modes.items()}
    bad = {m: set(r.get("bad_rows") or []) for m, r in modes.items()}
    every = set.intersection(*bad.values()) if bad else set()
    if every and all(not f for f in fin.values()):
        return "data", f"rows {sorted(every)[:20]} give a non-finite loss in every mode, fp32 included: the input rows are bad"
    if fin and all(fin.values()):
        return None, ("the batch is finite in train, eval and fp32 on these weights: look at mixed precision in the "
                      "run's backward, the optimizer's update, or weights that differ from the checkpoint given")
    if not fin.get("train", True) and not fin.get("eval", True) and fin.get("fp32", False):
        return "numeric", "non-finite in the run's precision, finite in fp32: the reduced precision overflows"
    if not fin.get("train", True) and fin.get("eval", True):
        return "numeric", "non-finite in train mode only: dropout, batch-norm statistics or the backward"
    return "numeric", "non-finite in eval mode too: the weights given are already bad"


def build_verdict(res: TraceResult, data: dict[str, Any] | None, replay: dict[str, Any] | None = None) -> dict[str, Any]:
    """The verdict of a trace (and its ``--data`` result): ``anomalies`` (each ``check``, ``severity``,
    ``step``, ``rank``, ``class``, ``why``, ``evidence``, ``next_experiment``; warn and error findings,
    earliest first), ``answers`` (the four answers: ``from_step``, ``ranks``, ``nan_or_inf``, ``rows``),
    ``not_judged`` (each check that could not run and why, and the rules' notes) and ``crashed`` (each
    log's crash in words: the Python traceback it ends with, :meth:`datacheck.trace.record.ReadStats.crash_text`). With ``replay``
    (``--replay``: the first bad step's batch replayed), ``replay`` holds it and its conclusion, and
    the anomaly at the replayed step takes the replay's class (:func:`replay_conclusion`) when it has one."""
    bad_rows, audited, row_checks = _data_rows(data)
    located = _row_places(data)
    rank_hits = {f.details["rank"]: f.details["step"] for f in res.findings
                 if f.check == "log.rank_divergence" and f.details.get("rank") and f.details.get("step") is not None}
    resumes = sorted({(int(r["to_step"]), 1) for f in res.findings if f.check == "log.step_regression"
                      for r in f.details.get("resumes", [])})
    anomalies = []
    not_anomalies = []  # findings at warn or above that are no anomaly of their own, and why
    numeric = any(f.check in ("log.non_finite", "log.loss_scale_collapse") for f in res.findings)
    for f in res.findings:
        if f.severity not in ("error", "warn"):
            continue
        if f.check == "log.skipped_steps":
            # the same event as the non-finite/collapse finding, the fp16 initial scale search, or the
            # dynamic scaler's back-offs once training had started: it raises the scale after every window
            # of clean steps (Megatron and DeepSpeed 1000, torch.amp.GradScaler 2000) and skips the step that
            # overflows; repeated back-offs are log.loss_scale_collapse, a non-finite loss log.non_finite
            early = f.details.get("before_first_success")
            not_anomalies.append({"check": f.check, "severity": f.severity, "why": (
                "the overflows of the non-finite or loss-scale finding" if numeric else
                "the fp16 initial loss-scale search (every skipped step came before the first successful one)"
                if early == f.count and f.details.get("success_logged", True) else
                "the fp16 initial loss-scale search as far as the log goes (every logged step was skipped and no "
                "successful one is logged: whether the scale settles is not known from this log)"
                if early == f.count else
                f"the fp16 initial loss-scale search ({early} skipped step(s) before the first successful one) "
                f"and {f.count - (early or 0)} back-off(s) of the dynamic loss scaler after it, from step "
                f"{f.details.get('first_after_success_step')}: no collapse of the scale, no non-finite loss")})
            continue
        d = dict(f.details)
        if data and data.get("replay_step") is not None and d.get("step") == data.get("anomaly_step"):
            d["replay_step"], d["replay_why"] = data["replay_step"], data.get("replay_why")
        cls, why = _classify(f, res, data, bad_rows, audited, rank_hits, resumes)
        if cls == "data":
            d["bad_rows"] = bad_rows
        lead = _grad_lead(f, res.findings)
        if lead is not None:
            why += f"; the grad norm rose first, at step {lead} (it leads the loss: lower the peak lr or clip harder)"
            d["grad_rise_step"] = lead
        a = {"check": f.check, "severity": f.severity, "step": d.get("step"), "rank": d.get("rank"), "class": cls,
             "why": why, "message": f.message, "evidence": _evidence(f, d), "next_experiment": _next(cls, f, d)}
        if lead is not None:
            a["grad_rise_step"] = lead
            a["evidence"].insert(1, {"what": "the grad norm rose first", "step": lead,
                                     "grad_norm": _value_at(res, d.get("rank"), "grad_norm", lead)})
        if cls == "data":
            a["evidence"] = a["evidence"] + [_row_evidence(r, row_checks, located) for r in bad_rows[:20]]
        if d.get("step_unit") == RECORD:  # a log without step numbers: its numbers are records
            a.update(step_unit=RECORD, why=as_records(a["why"]), next_experiment=as_records(a["next_experiment"]))
        anomalies.append(a)
    anomalies.sort(key=lambda a: (a["step"] is None, a["step"] if a["step"] is not None else 0,
                                  SEVERITY_ORDER[a["severity"]]))
    not_judged = [{"check": n["check"], "reason": n["reason"]} for n in res.not_run]
    not_judged += [{"check": n.split(":", 1)[0], "reason": n.split(":", 1)[1].strip()} for n in res.notes]
    out = {"anomalies": anomalies, "answers": _answers(res, data, anomalies), "not_judged": not_judged,
           "not_anomalies": not_anomalies,
           "crashed": [t for st in res.logs if (t := st.crash_text()) is not None]}
    if replay is not None:
        cls, text = replay_conclusion(replay)
        out["replay"] = {**replay, "class": cls, "conclusion": text}
        for a in anomalies:
            at = replay.get("anomaly_step", replay.get("step"))  # the replayed batch may be the update before
            if a["step"] is not None and at is not None and a["step"] == at:
                if cls is not None:
                    a["class"], a["why"] = cls, f"replay: {text}"
                a["evidence"] = a["evidence"] + [{"replay": m, "finite": r.get("finite"), "loss": r.get("loss"),
                                                  "bad_rows": r.get("bad_rows")} for m, r in replay["modes"].items()]
                a["next_experiment"] = (f"replayed: {text}" if cls is None else
                                        f"replayed ({text}); " + _next(cls, Finding(check=a["check"], severity=a["severity"],
                                                                                    message="", details={}),
                                                                       {"step": a["step"], "bad_rows": sorted(
                                                                           set.intersection(*[set(r.get("bad_rows") or [])
                                                                                              for r in replay["modes"].values()]))}))
    return out


def _value_at(res: TraceResult, stream: str | None, metric: str, step: int | None) -> float | None:
    """The value of ``metric`` the stream logged at ``step``: a non-finite one as logged (NaN, ``inf``,
    ``-inf``: answer 3 tells them apart, answer 1 must not contradict it), None when not kept."""
    if step is None or stream not in res.curves:
        return None
    c = res.curves[stream][metric]
    if step in c.bad_value:
        return c.bad_value[step]
    for s, v in c.points:
        if s == step:
            return v
    return None


def _g(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _answers(res: TraceResult, data: dict[str, Any] | None, anomalies: list[dict[str, Any]]) -> dict[str, Any]:
    fb = res.first_bad
    if fb is None:
        first = next((a for a in anomalies if a["step"] is not None and a["check"] != "log.skipped_steps"), None)
        if first is None:  # rows audited without an anomaly: the ledger's steps past the log's end (a crash)
            rows = _rows_answer(data, None) if data is not None and data.get("rows") else None
            return {"from_step": None, "ranks": None, "nan_or_inf": None, "rows": rows}
        fb = {"check": first["check"], "step": first["step"], "rank": first["rank"], "window": [first["step"]] * 2}
        fb.update({k: v for k, v in next(f.details for f in res.findings if f.check == first["check"]).items()
                   if not isinstance(v, (list, dict))})
    stream = fb.get("rank")
    step, good = fb.get("step"), fb.get("last_good_step")
    unit = {"step_unit": RECORD} if fb.get("step_unit") == RECORD else {}
    at = {**unit, "step": step, "window": fb.get("window"), "check": fb["check"], "lr": fb.get("lr"),
          "loss_scale": fb.get("loss_scale"),
          "grad_norm": fb.get("grad_norm") if fb.get("grad_norm") is not None else _value_at(res, stream, "grad_norm", step)}
    last = None if good is None else {
        **unit, "step": good, "lr": fb.get("last_good_lr"), "loss_scale": fb.get("last_good_loss_scale"),
        "grad_norm": fb.get("last_good_grad_norm") if fb.get("last_good_grad_norm") is not None
        else _value_at(res, stream, "grad_norm", good)}
    # a log's rank-less records beside its named rank's are that process's other stream, not a rank
    ranks_seen = sorted({r for r in map(res.rank_of, res.streams) if r is not None})
    hit = sorted({r for a in anomalies if a["rank"] is not None and a["check"] == fb["check"]
                  for r in [res.rank_of(a["rank"])] if r is not None})
    if len(ranks_seen) == 1:
        ranks = {"answer": "one log, no rank named" if not ranks_seen[0].startswith("rank ") else
                 f"only {ranks_seen[0]} is logged: the other ranks are unseen", "seen": ranks_seen, "affected": hit}
    else:
        # ranks --world-size names that logged nothing (log.rank_divergence): "all ranks" would claim them too
        unseen = next((f.details["missing"] for f in res.findings if f.check == "log.rank_divergence"
                       and f.details.get("missing")), [])
        tail = f"; ranks {unseen} are not in the logs" if unseen else ""
        # every rank went non-finite, but one first while others were still finite (log.rank_divergence):
        # "all ranks" hid the one to look at (processes whose models are their own, no all-reduce between them)
        first = next((f.details for f in res.findings if f.check == "log.rank_divergence"
                      and f.details.get("finite_ranks") and f.details.get("step") == step
                      and f.details.get("rank") == stream), None)
        every = (f"all {len(ranks_seen)} logged ranks" if unseen else "all ranks") + tail
        if set(hit) >= set(ranks_seen) and first is not None:
            every = (f"{first['rank']} first, at step {step} (ranks {first['finite_ranks']} still finite there, "
                     f"non-finite later){tail}")
        ranks = {"answer": every if set(hit) >= set(ranks_seen) else f"{', '.join(hit)} only (of {len(ranks_seen)}{tail})",
                 "seen": ranks_seen, "affected": hit}
    nf = next((f for f in res.findings if f.check == "log.non_finite" and f.details.get("rank") == stream), None) or \
        next((f for f in res.findings if f.check == "log.non_finite"), None)
    hidden = next((f for f in res.findings if f.check == "log.hidden_non_finite"), None)
    if nf is not None:
        reason = str(nf.details.get("reason", ""))
        kind = "NaN" if "nan" in reason.lower() else "inf" if "inf" in reason.lower() else "non-finite (suspected)"
        nan_inf = {"answer": f"{kind} at {_at(nf.details)} ({reason}); "
                             + ("the loss stays finite: the gradients are non-finite, the weights are not poisoned"
                                if nf.details.get("loss_stays_finite") else
                                "the grad norm stays finite after it: the logger carries the NaN loss on (no finite "
                                "loss is logged again), the weights are not poisoned"
                                if nf.details.get("grad_stays_finite") else
                                "persistent: no finite loss after it (the weights are poisoned)" if nf.details.get("persistent")
                                else f"transient: finite again from step {nf.details.get('recovered_step')}"
                                if nf.details.get("persistent") is False
                                else "the log ends at it (no record after it): persistent or transient is not known"),
                   "kind": kind, "step": nf.details.get("step"), "persistent": nf.details.get("persistent")}
    elif hidden is not None:
        nan_inf = {"answer": f"a non-finite loss hidden by the logger at step {hidden.details.get('step')} (logged as 0.0)",
                   "kind": "hidden", "step": hidden.details.get("step"), "persistent": None}
    elif any(f.check == "log.loss_scale_collapse" for f in res.findings):
        nan_inf = {"answer": "inf: fp16 overflows (the loss scale backed off); no NaN or inf loss logged",
                   "kind": "inf", "step": None, "persistent": None}
    else:
        nan_inf = {"answer": "neither: every logged loss and grad norm is finite", "kind": None, "step": None,
                   "persistent": None}
    told = nf if nf is not None else hidden
    if told is not None and told.details.get("step_unit") == RECORD:
        nan_inf.update(answer=as_records(nan_inf["answer"]), step_unit=RECORD)
    if data is None and fb.get("unplaced"):  # --data would be refused: no step to name rows by
        rows: dict[str, Any] = {"answer": f"not looked at: record {step} carries no step number to name rows by: "
                                + "; ".join((res.convention or {}).get("unplaced") or ["the log gives none"])}
    elif data is None:
        rows = {"answer": "not looked at: give --data (and --ledger or [batch]) to audit that step's rows"}
    elif not data.get("rows"):
        rows = {"answer": data.get("message", "no rows audited")}
    else:
        rows = _rows_answer(data, at)
    return {"from_step": {"first": at, "last_good": last}, "ranks": ranks, "nan_or_inf": nan_inf, "rows": rows}


def _rows_answer(data: dict[str, Any], at: dict[str, Any] | None) -> dict[str, Any]:
    """The fourth answer from the audited rows of ``data``: how many, in which log steps (said apart
    from the first anomaly ``at`` when they are not its; ``at`` None: no anomaly, the rows of the steps
    the ledger recorded past the log's end, said with why), and the failing ones with their checks."""
    bad_rows, audited, rc = _data_rows(data)
    located = _row_places(data)
    steps = data["rows"].get("steps") or {}
    n = sum(len(v) for rr in steps.values() for v in rr.values())
    where = (f"{n} row(s) in {steps_text(audited[0], audited[1])}" + (_apart(audited, at) if at is not None else "")
             if audited else f"{n} row(s)")
    if at is None and audited and data.get("unlogged_tail"):
        where += (f", the ledger's steps after the log's end (optimizer steps {data['audited_optimizer_steps'][0]}.."
                  f"{data['audited_optimizer_steps'][1]}): a run that stopped with an error stopped in "
                  + ("it" if audited[0] == audited[1] else "one of them"))
    elif at is None and audited and data.get("crash_tail"):
        where += (f", the steps after the log's last logged step up to the next it would have logged (optimizer steps "
                  f"{data['audited_optimizer_steps'][0]}..{data['audited_optimizer_steps'][1]}, from the plan): the "
                  "run crashed (the log ends in a Python traceback) in " + ("it" if audited[0] == audited[1] else
                                                                             "one of them"))
    # over several ranks, the rank(s) that loaded each failing row (the ledger's or the plan's)
    multi = len({rk for rr in steps.values() for rk in rr}) > 1
    loaded = {int(r["row"]): sorted({int(a["rank"]) for a in r.get("at") or [] if a.get("rank") is not None})
              for r in data["rows"].get("failing_rows") or []}

    def on(r: int) -> str:
        got = loaded.get(r) or []
        return f" on rank {', '.join(map(str, got))}" if multi and got else ""
    return {"answer": where
            + (f"; {len(bad_rows)} fail a check: " + "; ".join(f"{_row_txt(r, located)}{on(r)}: {', '.join(rc[str(r)])}"
                                                               for r in bad_rows[:5]) if bad_rows else
               "; none fails a data check (the rows look sound" + _not_run(data) + ")" + _plan_caveat(data))
            + (f"; {data['source']['past_end']}" if (data.get("source") or {}).get("past_end") else ""),
            "rows": n, "bad_rows": bad_rows}


def _not_run(data: dict[str, Any]) -> str:
    """What "the rows look sound" leaves out: ``" to the checks that ran; N could not run on them: ID, ID,
    ... (why: --format json, data.rows.skipped; the facts go in datacheck.toml)"``, the row audit's
    skipped row checks (a fact the config lacks, such as ``[tokens] vocab_size`` for ``tokens.out_of_vocab``,
    the first suspect of a run that crashed on an embedding's index, or a column the data lacks; not the
    opt-in ``schema.*`` contract); "" when every row check ran."""
    skipped = sorted({c for x in (data.get("rows") or {}).get("skipped") or [] for c in [str(x.get("check"))]
                      if is_known(c) and info(c).level == "row" and not c.startswith("schema.")})
    if not skipped:
        return ""
    shown = ", ".join(skipped[:20]) + (f", ... ({len(skipped)} in all)" if len(skipped) > 20 else "")
    return (f" to the checks that ran; {len(skipped)} could not run on them: {shown} (why: --format json, "
            "data.rows.skipped; the facts they need go in datacheck.toml)")


def _plan_caveat(data: dict[str, Any]) -> str:
    """What "the rows look sound" rests on when the rows come from the simulated plan (no ledger): the
    ``[batch]`` facts and the loader simulated; a run with another sampler loaded other rows at that
    step, so clean planned rows clear nothing. "" for a ledger's rows (what the run recorded)."""
    src = data.get("source") or {}
    if src.get("kind") != "plan":
        return ""
    return (", if the run loaded the rows the simulated plan gives (its [batch] facts and samplers: the data's "
            "source line); a sampler it does not simulate (length grouping, an IterableDataset, a custom sampler) loaded other rows at that "
            "step: record them with record_batches or DatacheckCallback and give --ledger")


def _apart(audited: list[int], at: dict[str, Any]) -> str:
    """``", after the anomaly's step 4 (--step)"`` when the audited log steps (``--step``, widened by
    ``--window``) hold none of the first anomaly's window ``at["window"]``: the rows are not that
    step's; "" when they do."""
    w = at.get("window") or [at["step"], at["step"]]
    if at.get("step") is None or audited[1] >= w[0] and audited[0] <= w[1]:
        return ""
    return f", {'after' if audited[0] > w[1] else 'before'} the anomaly's {steps_text(w[0], w[1])} (--step)"


def _evidence_line(e: dict[str, Any], unit: str = "step") -> str:
    """``file:line, step N: key value, ...`` (``what`` first when the line names what it is; ``unit``:
    ``record`` for a log without step numbers)."""
    if "checks" in e and "row" in e:  # a failing row of the audited steps
        where = (f"{e['shard']} row {e['shard_row']} (global {e['row']})" if e.get("shard") is not None
                 else f"global row {e['row']}")
        return f"{where}: fails {', '.join(e['checks']) or 'a check'}"
    head = ", ".join(str(x) for x in (e.get("what"), e.get("where")) if x is not None)
    at = f"{unit} {e['step']}" if e.get("step") is not None else ""
    vals = ", ".join(f"{k} {_g(x)}" for k, x in e.items() if x is not None and k not in ("what", "where", "step"))
    lead = ", ".join(x for x in (head, at) if x)
    return f"{lead}: {vals}" if lead and vals else lead or vals


def verdict_text(v: dict[str, Any]) -> list[str]:
    """The verdict as text lines: the four answers, then each anomaly's class, evidence and next
    experiment, then what could not be judged."""
    out = []
    a = v["answers"]
    fs = a["from_step"]
    if fs is None:
        loud = sorted({a["check"] for a in v["anomalies"]})
        quiet = "; ".join(f"{n['check']} [{n['severity']}] is {n['why']}, not an anomaly"
                          for n in v.get("not_anomalies", []))
        quiet = f" ({quiet})" if quiet else ""
        out.append("1. from which step: " + (
            f"no first bad step: {len(v['anomalies'])} anomaly(ies) at warn or above ({', '.join(loud)}), listed "
            "below, mark no step where training went bad" if loud else "no anomaly at warn or above") + quiet
            + "".join(f"; the run crashed: {t}" for t in v.get("crashed") or []))
    else:
        f, g = fs["first"], fs["last_good"]
        u = f.get("step_unit", "step")
        w = f.get("window") or [f["step"], f["step"]]
        win = f"{u} {f['step']}" if w[0] == w[1] else f"{u}s {w[0]}..{w[1]} (logged every {w[1] - w[0] + 1})"
        out.append(f"1. from which step: {win} ({f['check']}): lr {_g(f['lr'])}, loss scale {_g(f['loss_scale'])}, "
                   f"grad norm {_g(f['grad_norm'])}; last good {u} "
                   + (f"{g['step']}: lr {_g(g['lr'])}, loss scale {_g(g['loss_scale'])}, grad norm {_g(g['grad_norm'])}"
                      if g else f"{f['step']} itself: the eval minimum, the checkpoint worth keeping (the eval loss "
                      "rises after it)" if f["check"] == "log.overfit_onset" else "none before it"))
    out.append("2. all ranks or one: " + (a["ranks"]["answer"] if a["ranks"] else "-"))
    out.append("3. NaN or inf: " + (a["nan_or_inf"]["answer"] if a["nan_or_inf"] else "no anomaly"))
    out.append("4. the rows of that step: " + (a["rows"]["answer"] if a["rows"] else "no anomaly"))
    if v["anomalies"]:
        out.append("verdict:")
    last_next = None
    for an in v["anomalies"]:
        u = an.get("step_unit", "step")
        at = f"{u} {an['step']}" if an["step"] is not None else "the run"
        out.append(f"  [{an['class']}] {an['check']} at {at}" + (f" ({an['rank']})" if an["rank"] else "")
                   + f": {an['why']}")
        for e in an["evidence"][:4]:
            out.append("    evidence: " + _evidence_line(e, u))
        out.append("    next: " + ("as above" if an["next_experiment"] == last_next else an["next_experiment"]))
        last_next = an["next_experiment"]
    if v.get("replay"):
        r = v["replay"]
        out.append(f"replay of step {r['step']} ({r['spec']}" + (f", checkpoint {r['checkpoint']}" if r.get("checkpoint") else "")
                   + "): " + "; ".join(f"{m} loss {_g(x.get('loss'))}" + (f", non-finite rows {x['bad_rows'][:10]}"
                                                                          if x.get("bad_rows") else "")
                                     for m, x in r["modes"].items()) + f": {r['conclusion']}")
    if v["not_judged"]:
        out.append("not judged:")
        for n in v["not_judged"]:
            out.append(f"  {n['check']}: {n['reason']}")
    return out
