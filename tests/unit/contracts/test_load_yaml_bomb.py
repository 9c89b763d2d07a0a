"""A YAML alias bomb in a schema file is refused, bounded in memory and time."""
from __future__ import annotations

import pytest

from datacheck.contracts import load_contract
from datacheck.contracts.load import MAX_YAML_NODES
from datacheck.model.errors import ConfigError

BOMB = "\n".join(['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
                 + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]) + "\n"


def test_alias_bomb_is_a_config_error(tmp_path):
    assert len(BOMB) < 1024
    p = tmp_path / "bomb.yaml"
    p.write_text(BOMB)
    with pytest.raises(ConfigError, match=f"over the limit of {MAX_YAML_NODES}.*alias bomb"):
        load_contract(str(p))


def test_small_aliases_still_load(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("schema_type: polars_dataframe\napi: polars\nname: ok\ncolumns:\n"
                 "  text: &s {dtype: String, nullable: false}\n  title: *s\n")
    c = load_contract(str(p))
    assert sorted(c.schema.columns) == ["text", "title"]
