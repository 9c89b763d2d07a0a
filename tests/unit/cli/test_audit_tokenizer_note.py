"""``audit`` says on stderr when ``[tokens] tokenizer`` is set, no audited shard has chat messages
or preference pairs for it to render and the config already sets every fact it gives (nothing was
checked against it); the note is kept by the whole-audit memo, and absent where the tokenizer renders
or gives a fact."""
from __future__ import annotations

import json
from pathlib import Path

from conftest import SHARED, run_cli

TOKENIZER = SHARED / "chat/tokenizers/smollm_135m"
#: every fact the SmolLM-135M tokenizer gives (PROVENANCE.md: 49152 base tokens plus the added
#: [PAD] = 49152; eos = bos = <|endoftext|> = 0), set in the config
ALL_FACTS = "vocab_size = 49153\npad_token_id = 49152\neos_token_id = 0\nbos_token_id = 0\n"


def _setup(tmp_path: Path, rows: list[dict], facts: str = ALL_FACTS) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{TOKENIZER}"\n{facts}[labels]\nnum_classes = 2\n')
    return data, cfg


def _note(tok: Path) -> str:
    return (f"datacheck: note: [tokens] tokenizer = {str(tok)!r} was not used: no audited shard has chat messages "
            "or preference pairs for it to render, and the config already sets the facts it gives (an audit reads a "
            "tokenizer to render them and for [tokens] vocab_size, pad/eos/bos_token_id when unset)\n")


def test_an_unused_tokenizer_is_said(tmp_path):
    data, cfg = _setup(tmp_path, [{"text": "a", "label": 0}, {"text": "b", "label": 1}])
    args = ("audit", str(data), "--config", str(cfg), "--report-dir", str(tmp_path / "r"),
            "--cache-dir", str(tmp_path / "c"), "--no-progress")
    first = run_cli(*args, cwd=tmp_path)
    assert first.returncode == 0 and first.stderr == _note(TOKENIZER)
    again = run_cli(*args, cwd=tmp_path)  # answered from the whole-audit memo or audited again: the same words
    assert again.returncode == 0 and again.stderr == _note(TOKENIZER)


def test_a_tokenizer_that_renders_messages_is_not_called_unused(tmp_path):
    conv = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    data, cfg = _setup(tmp_path, [conv, conv])
    res = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
                  "--no-progress", cwd=tmp_path)
    assert "was not used" not in res.stderr


def test_a_tokenizer_that_gives_a_fact_is_not_called_unused(tmp_path):
    data, cfg = _setup(tmp_path, [{"text": "a", "label": 0}, {"text": "b", "label": 1}], facts="vocab_size = 49153\n")
    res = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
                  "--no-progress", "--output", str(tmp_path / "rep.json"), cwd=tmp_path)
    assert res.returncode == 0 and "was not used" not in res.stderr
    facts = json.loads((tmp_path / "rep.json").read_text())["tokenizer_facts"]
    assert facts == {"tokenizer": str(TOKENIZER), "facts": {"pad_token_id": 49152, "eos_token_id": 0, "bos_token_id": 0}}
