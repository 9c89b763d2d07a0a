"""``datacheck trace --checkpoints DIR``: at each resume point of a training log, the checkpoint the run
resumed from and what it lacked, next to the symptom the log shows.

A resume point is a ``resume`` event of ``datacheck trace`` (the step numbers go back: the first step
logged after the resume, ``step``, and the last one before it, ``from_step``). The checkpoint it resumed
from is the one of ``DIR`` with the highest step at or below ``step`` (a run resumed from the checkpoint of
step N logs N+1 first, or N when it counts from the checkpoint's own step). Checkpoint steps are read from
their names: Hugging Face ``checkpoint-N``, DeepSpeed ``global_stepN``, Lightning ``...step=N...ckpt``,
or any folder or ``.ckpt`` / ``.pt`` / ``.pth`` file whose name ends in a number (``step_500``,
``ckpt-500.pt``). Each chosen checkpoint is inspected once (:func:`datacheck.resume.checkpoint.inspect_checkpoint`).

The join: a ``log.*`` finding at the resume point (its step within :data:`NEAR` steps after it) is set
beside the ``ckpt.*`` finding that explains it (:data:`EXPLAINS`): a learning-rate jump or warmup restart
beside a missing scheduler or a step mismatch, a loss or grad-norm spike beside missing optimizer moments,
a loss-scale collapse beside a missing scaler.

This module imports nothing of ``datacheck.trace``: the CLI passes trace's events and findings in.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from datacheck.model.errors import DatacheckError, UsageError
from datacheck.model.findings import Finding
from datacheck.resume.checkpoint import CheckpointInfo, inspect_checkpoint

__all__ = ["EXPLAINS", "NEAR", "checkpoint_steps", "resume_checkpoints", "summary_lines"]

#: a log finding within this many steps after a resume point belongs to it
NEAR = 20
#: log check -> the checkpoint checks that explain it at a resume point
EXPLAINS: dict[str, tuple[str, ...]] = {
    "log.lr_discontinuity": ("ckpt.missing_scheduler", "ckpt.step_mismatch"),
    "log.loss_spike": ("ckpt.missing_optimizer", "ckpt.missing_rng", "ckpt.missing_sampler_state"),
    "log.grad_norm_spike": ("ckpt.missing_optimizer",),
    "log.loss_scale_collapse": ("ckpt.missing_scaler",),
    "log.skipped_steps": ("ckpt.missing_scaler",),
    "log.rank_divergence": ("ckpt.rank_missing", "ckpt.missing_rng"),
    "log.step_regression": (),
}
_STEP_NAME = [re.compile(r"^checkpoint-(\d+)$"), re.compile(r"^global_step(\d+)$"),
              re.compile(r"step[=_-]?(\d+)"), re.compile(r"(\d+)(?:\.(?:ckpt|pt|pth))?$")]


def checkpoint_steps(folder: str | Path) -> dict[int, Path]:
    """step -> checkpoint under ``folder`` (its direct entries; the names' step numbers, see the module
    docstring).

    Raises:
        UsageError: ``folder`` is not a folder, or holds no entry whose name gives a step.
    """
    base = Path(folder)
    if not base.is_dir():
        raise UsageError(f"--checkpoints {folder}: not a folder")
    out: dict[int, Path] = {}
    for p in sorted(base.iterdir()):
        if p.is_file() and p.suffix not in (".ckpt", ".pt", ".pth"):
            continue
        for rx in _STEP_NAME:
            m = rx.search(p.name)
            if m:
                out.setdefault(int(m.group(1)), p)
                break
    if not out:
        raise UsageError(f"--checkpoints {folder}: no checkpoint-N, global_stepN, step=N or numbered checkpoint in it")
    return dict(sorted(out.items()))


def _near(f: Finding, step: int) -> bool:
    s = f.details.get("step")
    return isinstance(s, int) and step <= s <= step + NEAR


def resume_checkpoints(events: list[dict[str, Any]], findings: list[Finding], folder: str | Path, *,
                       fp16: bool | None = None) -> dict[str, Any]:
    """Each resume point of the log, the checkpoint it resumed from, what that lacked and the log's symptoms.

    Args:
        events: ``datacheck trace``'s events (those of kind ``resume`` are used).
        findings: trace's ``log.*`` findings.
        folder: the checkpoints folder.
        fp16: whether the run used a loss scaler (see :func:`inspect_checkpoint`); a ``log.loss_scale_collapse``
            anywhere in the log also says so.

    Returns:
        ``{"folder", "checkpoints": [steps found], "resumes": [...], "findings": [ckpt.* finding dicts]}``;
        each resume: ``step``, ``from_step``, ``rank``, ``checkpoint`` (``step``, ``path``, ``layout``) or None,
        ``lacked`` (the ``ckpt.*`` IDs), ``symptoms`` (the ``log.*`` IDs near it) and ``explained``
        (``[log ID, ckpt ID]`` pairs).

    Raises:
        UsageError: the folder holds no checkpoint it can name by step.
    """
    found = checkpoint_steps(folder)
    if fp16 is None and any(f.check == "log.loss_scale_collapse" for f in findings):
        fp16 = True
    infos: dict[int, CheckpointInfo | str] = {}
    resumes = []
    seen: set[tuple[int, Any]] = set()
    for ev in events:
        if ev.get("kind") != "resume" or not isinstance(ev.get("step"), int):
            continue
        step = ev["step"]
        if (step, ev.get("from_step")) in seen:  # one resume point seen on several ranks
            continue
        seen.add((step, ev.get("from_step")))
        below = [s for s in found if s <= step]
        entry: dict[str, Any] = {"step": step, "from_step": ev.get("from_step"), "rank": ev.get("rank"),
                                 "checkpoint": None, "lacked": [], "symptoms": [], "explained": [], "error": None}
        symptoms = [f for f in findings if f.check.startswith("log.") and _near(f, step)]
        entry["symptoms"] = sorted({f.check for f in symptoms})
        if below:
            cs = max(below)
            if cs not in infos:
                try:
                    infos[cs] = inspect_checkpoint(found[cs], fp16=fp16)
                except DatacheckError as e:
                    infos[cs] = str(e)
            info = infos[cs]
            if isinstance(info, str):
                entry["checkpoint"] = {"step": cs, "path": str(found[cs]), "layout": None}
                entry["error"] = info
            else:
                entry["checkpoint"] = {"step": cs, "path": str(found[cs]), "layout": info.layout}
                entry["lacked"] = info.missing()
                entry["explained"] = [[s, c] for s in entry["symptoms"] for c in EXPLAINS.get(s, ())
                                      if c in entry["lacked"]]
        resumes.append(entry)
    ck_findings = [dict(f.to_dict(), checkpoint_step=s) for s, i in infos.items() if not isinstance(i, str)
                   for f in i.findings]
    return {"folder": str(folder), "checkpoints": list(found), "resumes": resumes, "findings": ck_findings}


def summary_lines(joined: dict[str, Any]) -> list[str]:
    """Text lines for ``trace``'s output."""
    out = [f"checkpoints in {joined['folder']}: steps {joined['checkpoints']}"]
    if not joined["resumes"]:
        out.append("  no resume point in the log")
    for r in joined["resumes"]:
        head = f"  resume at step {r['step']} (the log was at {r['from_step']})"
        ck = r["checkpoint"]
        if ck is None:
            out.append(head + ": no checkpoint at or below that step")
            continue
        if r["error"]:
            out.append(head + f": from checkpoint step {ck['step']} ({ck['path']}), unreadable: {r['error']}")
            continue
        lacked = ", ".join(r["lacked"]) or "nothing"
        out.append(head + f": from checkpoint step {ck['step']} ({ck['layout']}), which lacked: {lacked}")
        for s, c in r["explained"]:
            out.append(f"    {s} here is explained by {c}")
        rest = [s for s in r["symptoms"] if s not in {x for x, _ in r["explained"]}]
        if rest:
            out.append(f"    also at this resume: {', '.join(rest)}")
    return out
