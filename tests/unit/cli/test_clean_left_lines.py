"""`datacheck clean`'s "left in place" lines: a finding's message longer than the line allows is cut
with a mark, keeping its last sentence (what to do); it is never cut mid-sentence without a mark
("... where the  (1 left in the copy)", a new user's padding.label_not_ignored line)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from datacheck.cli.commands.clean import _MESSAGE_CHARS, _left_lines
from datacheck.tools.clean import LeftInPlace

ADVICE = "Set labels to ignore_index where the mask is 0"


def _message(shard: str) -> str:
    """padding.label_not_ignored's message as the audit words it for one shard."""
    return (f"{shard}: 1 row(s) carry labels other than ignore_index -100 at padded positions (attention_mask 0; "
            f"37 positions): the loss trains on padding. {ADVICE}")


def _line(message: str) -> str:
    x = LeftInPlace(check="padding.label_not_ignored", severity="error", fails_policy=True, count=1,
                    message=message, left=1)
    lines = _left_lines(SimpleNamespace(left_in_place=(x,), out=Path("out")))  # type: ignore[arg-type]
    (line,) = [ln for ln in lines if ln.startswith("  padding.label_not_ignored")]
    return line


def test_a_long_message_keeps_its_advice_and_marks_the_cut():
    msg = _message("sft/smollm2_chatml_left_padded/data/train-00000-of-00004-left.parquet")
    assert len(msg) > _MESSAGE_CHARS  # the case the new user hit
    line = _line(msg)
    assert line.endswith(f"{ADVICE} (1 left in the copy)")
    assert "…" in line
    shown = line[len("  padding.label_not_ignored [error]: "):-len(" (1 left in the copy)")]
    assert len(shown) <= _MESSAGE_CHARS + 1  # the cut mark


def test_a_short_message_is_shown_whole():
    msg = _message("b.parquet")
    assert len(msg) <= _MESSAGE_CHARS
    assert _line(msg) == f"  padding.label_not_ignored [error]: {msg} (1 left in the copy)"
