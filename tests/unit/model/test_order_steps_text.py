"""datacheck/model/order.py: a range of steps said in words."""
from __future__ import annotations

import pytest

from datacheck.model.order import steps_text


@pytest.mark.parametrize(("first", "last", "noun", "text"), [
    (0, 9, "step", "steps 0..9"), (5, 5, "step", "step 5"), (0, -1, "step", "no step"),
    (1, 0, "log step", "no log step"), (1, 3, "log step", "log steps 1..3")])
def test_steps_text(first, last, noun, text):
    assert steps_text(first, last, noun) == text
