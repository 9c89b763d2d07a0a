"""A ``[policy]`` entry written in a shape TOML reads differently from what the user meant is refused
with the shape to write: a bare severity (``"ID" = "warn"``), and a check ID left unquoted (TOML reads
``tokens.out_of_vocab.severity = "warn"`` or ``[policy.tokens.out_of_vocab]`` as nested tables
``tokens`` > ``out_of_vocab``, whose ID then never reaches datacheck). A misspelt entry key gets the
closest key of the entry, as every other section's keys do."""
from __future__ import annotations

import tomllib

import pytest

from datacheck.model.config import PolicyEntry, config_from_dict
from datacheck.model.errors import ConfigError


def _refusal(toml: str) -> str:
    with pytest.raises(ConfigError) as e:
        config_from_dict(tomllib.loads(toml))
    return str(e.value)


@pytest.mark.parametrize("severity", ["warn", "error", "info"])
def test_bare_severity_names_the_table_to_write(severity):
    msg = _refusal(f'[policy]\n"tokens.out_of_vocab" = "{severity}"\n')
    assert f"\"tokens.out_of_vocab\" = {{ severity = \"{severity}\" }}" in msg, msg
    assert "PolicyEntry" not in msg and "valid dictionary" not in msg


def test_a_number_names_the_entry_keys():
    msg = _refusal('[policy]\n"dup.exact_in_shard" = 0.01\n')
    for key in PolicyEntry.model_fields:  # every key an entry may hold, from the model itself
        assert key in msg, msg
    assert "PolicyEntry" not in msg and "valid dictionary" not in msg


@pytest.mark.parametrize("toml", [
    '[policy]\ntokens.out_of_vocab.severity = "warn"\n',              # dotted key, unquoted
    '[policy]\ntokens.out_of_vocab = { severity = "warn" }\n',        # unquoted ID, inline table
    '[policy.tokens.out_of_vocab]\nseverity = "warn"\n',              # table header, unquoted
])
def test_unquoted_check_id_says_to_quote_it(toml):
    msg = _refusal(toml)
    assert "'tokens.out_of_vocab'" in msg and "quote" in msg, msg
    assert '"tokens.out_of_vocab" = { severity = "warn" }' in msg
    assert '[policy."tokens.out_of_vocab"]' in msg
    assert "unknown key 'policy.tokens.out_of_vocab'" not in msg


def test_the_quoted_forms_are_read():
    for toml in ('[policy]\n"tokens.out_of_vocab" = { severity = "warn" }\n',
                 '[policy."tokens.out_of_vocab"]\nseverity = "warn"\n'):
        assert config_from_dict(tomllib.loads(toml)).policy["tokens.out_of_vocab"].severity == "warn"


def test_misspelt_entry_key_gets_the_closest_key():
    msg = _refusal('[policy]\n"tokens.out_of_vocab" = { sevrity = "warn" }\n')
    assert "unknown key 'policy.tokens.out_of_vocab.sevrity'" in msg
    assert "(did you mean 'severity'?)" in msg, msg


def test_unquoted_misspelt_id_says_to_quote_it_and_names_the_close_id():
    msg = _refusal('[policy]\ntokens.out_of_vocb.severity = "warn"\n')
    assert "quote it" in msg and '"tokens.out_of_vocb" = { severity = "warn" }' in msg, msg
    assert "(did you mean 'tokens.out_of_vocab'?)" in msg


@pytest.mark.parametrize("toml, words", [
    ('[splits]\ntrain = []\n', ["'splits.train'", "at least 1 item"]),           # the list member's own rule
    ('[splits]\ntrain = 5\n', ["'splits.train'", "a valid string or", "a valid list"]),  # every member named
])
def test_a_value_fitting_no_member_of_a_union_names_what_would_fit(toml, words):
    # [splits] takes a glob or a non-empty list of globs: "Input should be a valid string" alone
    # (the first member's message) was wrong for an empty list and half the answer for a number
    msg = _refusal(toml)
    for w in words:
        assert w in msg, msg
    assert "Input should be a valid string (got [])" not in msg
