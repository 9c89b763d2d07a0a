"""``sft.role_order``'s per-row verdict (``checks/sft.turn_order_kinds``: one numpy pass over the
flattened canonical roles) against a plain-Python reference of the rules on random conversations:
null rows, empty conversations, null and unknown roles, every canonical role in any order, rows
split over several chunks."""
from __future__ import annotations

import polars as pl
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.checks.sft import TURN_ORDER_RULES, turn_order_kinds


def reference(roles: list[str | None] | None) -> str | None:
    """The rule the first faulty turn breaks, judged turn by turn (the docstring's order)."""
    if roles is None:
        return None
    known = {"system", "user", "assistant", "tool_call", "tool"}
    seen_user = False
    for i, r in enumerate(roles):
        before = roles[i - 1] if i else None
        seen_user = seen_user or r == "user"
        if r is None:
            return "null role"
        if r not in known:
            return "unknown role"
        if r == "system" and i > 0:
            return "system not first"
        if r == "user" and before == "user":
            return "two user turns in a row"
        if r in ("assistant", "tool_call") and not seen_user:
            return "assistant before any user"
        if r == "tool" and before not in ("tool_call", "tool"):
            return "tool result without a tool call"
    return None


ROLE = st.sampled_from([None, "system", "user", "assistant", "tool_call", "tool", "gpt", "narrator"])


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.one_of(st.none(), st.lists(ROLE, max_size=7)), max_size=12), cut=st.integers(0, 12))
def test_kernel_equals_the_turn_by_turn_rules(rows, cut):
    s = pl.Series("roles", rows, dtype=pl.List(pl.String))
    if 0 < cut < len(rows):  # two chunks, as a batch of several record batches arrives
        s = pl.concat([s[:cut], s[cut:]], rechunk=False)
    assert turn_order_kinds(s).to_list() == [reference(r) for r in rows]


def test_each_rule_by_name():
    rows = [["user", None], ["user", "narrator"], ["user", "assistant", "system"], ["user", "user"],
            ["assistant", "user"], ["user", "tool"], ["system", "user", "tool_call", "tool", "tool", "assistant"], []]
    assert turn_order_kinds(pl.Series(rows, dtype=pl.List(pl.String))).to_list() == [*TURN_ORDER_RULES, None, None]
