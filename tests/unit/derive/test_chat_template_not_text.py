"""A tokenizer_config.json whose chat_template is no text (a number, a named template's number):
transformers loads it, and every conversation raised a TypeError that audit blamed on its row
(sft.role_order on every row, exit 1). It is the tokenizer's fault: a usage error naming the file."""
from __future__ import annotations

import json

import pytest
from conftest import run_cli
from hostilegen import write_tokenizer

pytest.importorskip("transformers")  # the `chat` extra (in dev)


@pytest.mark.parametrize("template,label,kind", [
    (5, "chat template", "number"),
    ([{"name": "default", "template": 5}, {"name": "tool_use", "template": "{{ messages }}"}],
     "chat template 'default'", "number"),
    ([{"name": "default", "template": "{{ messages }}"}, {"name": "rag", "template": [1]}],
     "chat template 'rag'", "array"),
])
def test_a_template_that_is_not_text_is_a_usage_error(tmp_path, template, label, kind):
    d = tmp_path / "data"
    d.mkdir()
    conv = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a b"}]
    (d / "a.jsonl").write_text(json.dumps({"messages": conv}) + "\n")
    tok = tmp_path / "tok"
    write_tokenizer(tok, None)
    cfg = json.loads((tok / "tokenizer_config.json").read_text())
    (tok / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": template}))
    (tmp_path / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{tok}"\n')
    r = run_cli("audit", str(d), "--config", str(tmp_path / "datacheck.toml"), "--report-dir", str(tmp_path / "r"),
                "--no-cache", "--no-progress")
    assert r.returncode == 2, r.stdout[-400:]
    assert f"the {label} in {tok / 'tokenizer_config.json'} is a JSON {kind}, not the template's text" in r.stderr
    assert "Traceback" not in r.stderr
