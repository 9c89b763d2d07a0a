"""Resume you can trust: what a checkpoint holds (``datacheck checkpoint``, :mod:`.checkpoint`), which
rows a run trained on across resumes and ranks (``datacheck order verify``, :mod:`.order`), and the
checkpoint each resume point of a training log resumed from (``datacheck trace --checkpoints``,
:mod:`.join`).

:data:`RESUME_IDS` names the producer of each ``ckpt.*`` and ``order.*`` check ID (``datacheck checks``
lists them from here; ``tests/unit/checks/test_registry.py`` counts them as their one producer).
"""
from __future__ import annotations

__all__ = ["RESUME_IDS", "RESUME_NOTES"]

#: check ID -> the module that produces it
RESUME_IDS: dict[str, str] = {
    **{f"ckpt.{n}": "datacheck.resume.checkpoint" for n in (
        "missing_optimizer", "missing_scheduler", "missing_scaler", "missing_rng", "missing_sampler_state",
        "step_mismatch", "rank_missing", "unsafe_pickle")},
    **{f"order.{n}": "datacheck.resume.order" for n in ("seen_twice", "never_seen", "divergent_step", "rank_skew")},
}
#: family -> how its checks run (``datacheck checks ID`` shows it)
RESUME_NOTES = {"ckpt": "a checkpoint check: run by `datacheck checkpoint PATH`, not by audit",
                "order": "a recorded-order check: run by `datacheck order verify RUN/`, not by audit"}
