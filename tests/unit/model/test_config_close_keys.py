"""An unknown ``datacheck.toml`` key is refused with the key of its section closest in spelling (the
file's own spelling of it), and no guess when none is close or the section holds free names."""
from __future__ import annotations

import pytest

from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError


@pytest.mark.parametrize("data,unknown,near", [
    ({"tokens": {"vocab_sise": 5}}, "'tokens.vocab_sise' in [tokens]", "vocab_size"),
    ({"token": {"vocab_size": 5}}, "'token' at the top level", "tokens"),
    ({"labels": {"ignore_idx": -100}}, "'labels.ignore_idx' in [labels]", "ignore_index"),
    ({"batch": {"batchsize": 8}}, "'batch.batchsize' in [batch]", "batch_size"),
    ({"columns": {"input_id": "ids"}}, "'columns.input_id' in [columns]", "input_ids"),
])
def test_unknown_key_names_the_closest_key(data, unknown, near):
    with pytest.raises(ConfigError) as e:
        config_from_dict(data)
    assert f"unknown key {unknown}: remove it or fix its spelling (did you mean {near!r}?)" in str(e.value)


def test_no_guess_when_nothing_is_close():
    with pytest.raises(ConfigError) as e:
        config_from_dict({"tokens": {"frobnicate": 1}})
    msg = str(e.value)
    assert "unknown key 'tokens.frobnicate' in [tokens]: remove it or fix its spelling" in msg
    assert "did you mean" not in msg
