"""Every config key that sizes work has an upper bound, paths take no NUL, and the read bounds of
``[dataset]`` enter the config hash only when set to another value than their default."""
from __future__ import annotations

import pytest

from datacheck.model.config import MAX_EPOCHS, MAX_ID_LIST, MAX_WORLD_SIZE, Config, config_from_dict
from datacheck.model.errors import ConfigError

I63 = 2**63 - 1


@pytest.mark.parametrize(("section", "key", "value"), [
    ("batch", "epochs", I63), ("batch", "epochs", MAX_EPOCHS + 1), ("batch", "batch_size", 2**63),
    ("batch", "batch_size", 2**31), ("batch", "world_size", I63), ("batch", "world_size", MAX_WORLD_SIZE + 1),
    ("batch", "grad_accum", 2**63), ("batch", "seed", 2**63), ("batch", "max_tokens", 2**63),
    ("sft", "response_template_ids", [5] * 100_000), ("sft", "response_template_ids", [2**63]),
    ("tokens", "eot_token_ids", [1] * (MAX_ID_LIST + 1)), ("tokens", "pad_token_id", 2**63),
    ("tokens", "type_vocab_size", 2**63), ("labels", "ignore_index", -(2**63) - 1),
    ("dataset", "index", "\u0000"), ("dataset", "index", "a\u0000b"), ("dataset", "schema", "\u0000.yaml"),
    ("tokens", "tokenizer", "tok\u0000"), ("dataset", "max_member_bytes", 0), ("dataset", "max_file_bytes", 2**45),
])
def test_value_beyond_its_bound_is_a_config_error_naming_the_key(section, key, value):
    with pytest.raises(ConfigError) as exc:
        config_from_dict({section: {key: value}})
    assert exc.value.key == f"{section}.{key}"
    assert len(str(exc.value)) < 600  # a 100,000-id list is not echoed whole


def test_bounds_accept_real_values():
    cfg = config_from_dict({"batch": {"epochs": MAX_EPOCHS, "world_size": 4096, "batch_size": 2**31 - 1,
                                      "seed": 2**63 - 1}, "sft": {"response_template_ids": [1] * MAX_ID_LIST}})
    assert cfg.batch.epochs == MAX_EPOCHS


def test_read_bounds_change_the_hash_only_when_set():
    default = Config().hash()
    same = config_from_dict({"dataset": {"max_member_bytes": 256 << 20}}).hash()
    other = config_from_dict({"dataset": {"max_member_bytes": 1 << 20}}).hash()
    assert same == default != other
