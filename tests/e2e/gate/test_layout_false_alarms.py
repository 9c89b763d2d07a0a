"""The gate's false alarms, each fixed as a kind (every test here failed before shards had layouts):

- SFT response rules on pre-training rows (GPT-2 ``group_texts`` rows: ``sft.truncated_response`` on
  every row), and the skipped list of a pre-training shard filled with checks that cannot apply;
- ``dup.exact_in_shard`` on tabular rows whose content was the label alone;
- the standard encoder-decoder layout (labels a different length from ``input_ids``) failing checks;
- an OpenAI assistant message with ``tool_calls`` and no content reported as an empty turn;
- a chat template without ``{% generation %}``: one finding about the template, not two per row, and
  "after truncation" only of rows truncation cut;
- ``tokens.out_of_vocab`` naming ``pad_token_id`` when the pad is the out-of-range id;
- examples at the first bad position (``packing.position_ids_not_reset``, ``mask.not_contiguous``,
  ``padding.*``);
- the minimum length of an index-hash prefix in the "no such report file" message.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from checkhelp import CHATML, TOKENIZER, tokenizer_copy
from conftest import REALDATA, SHARED, run_cli

import datacheck
from datacheck.engine.shard import audit_frame
from datacheck.model.config import config_from_dict

EOS = 50256


def _group_texts(n_rows: int = 40, block: int = 1024) -> pl.DataFrame:
    """GPT-2 BPE over tinyshakespeare, concatenated with eos and cut in ``block``-id rows (run_clm's
    ``group_texts``): labels = input_ids, no padding."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(REALDATA / "gpt2_tokenizer" / "vocab.json"),
                                           str(REALDATA / "gpt2_tokenizer" / "merges.txt"))
    text = (REALDATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    ids: list[int] = []
    for p in text.split("\n\n"):
        if len(ids) > n_rows * block:
            break
        ids += tok.encode(p).ids + [EOS]
    rows = [ids[i * block:(i + 1) * block] for i in range(n_rows)]
    return pl.DataFrame({"input_ids": rows, "attention_mask": [[1] * block for _ in rows], "labels": rows})


PRETRAIN = {"tokens": {"vocab_size": 50257, "eos_token_id": EOS, "pad_token_id": EOS, "max_seq_len": 1024}}


def _audit_dir(tmp_path: Path, df: pl.DataFrame, toml: str, *args: str):
    data = tmp_path / "data"
    data.mkdir(parents=True)
    df.write_parquet(data / "train.parquet")
    (tmp_path / "datacheck.toml").write_text(toml, encoding="utf-8")
    out = tmp_path / "report.json"
    r = run_cli("audit", str(data), "--config", str(tmp_path / "datacheck.toml"), "--no-cache", "--no-progress",
                "--report-dir", str(tmp_path / "reports"), "--output", str(out), *args)
    assert "Traceback" not in r.stderr, r.stderr
    return r, json.loads(out.read_text(encoding="utf-8"))


def test_pretraining_rows_are_not_judged_as_responses(tmp_path):
    df = _group_texts()
    toml = "[tokens]\nvocab_size = 50257\neos_token_id = 50256\npad_token_id = 50256\nmax_seq_len = 1024\n"
    r, rep = _audit_dir(tmp_path, df, toml, "--fail-on", "warn")
    assert r.returncode == 0, r.stdout
    shard = rep["shards"][0]
    assert (shard["layout"], shard["layout_source"]) == ("packed_lm", "recognized")
    assert shard["findings"] == []
    skipped = {s["check"] for s in rep["skipped"]}
    assert not {c for c in skipped if c.startswith(("sft.", "pref.", "length.ctc"))}
    # one summary line for the checks that cannot apply, with the command that lists them
    n = shard["not_applicable"]
    assert n >= 10
    assert f"{n} checks do not apply to packed_lm; `datacheck checks --layout packed_lm` lists them" in r.stdout
    # the whole text output of a clean pre-training shard fits on one screen
    assert len(r.stdout.splitlines()) <= 30, r.stdout


def test_the_same_rows_declared_sft_are_judged_as_responses(tmp_path):
    """A layout given in the config wins over the recognizer: the response rules then run."""
    res = audit_frame(_group_texts(8), config_from_dict({**PRETRAIN, "dataset": {"layout": "sft_tokenized"}}))
    assert res.layout == {"name": "sft_tokenized", "source": "config", "why": '[dataset] layout = "sft_tokenized"'}
    cut = [f for f in res.findings if f.check == "sft.truncated_response"]
    assert cut and cut[0].count == sum(1 for r in _group_texts(8)["labels"] if r[-1] != EOS)


def test_tabular_rows_are_compared_on_their_features():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2500, 8))
    df = pl.DataFrame({f"f{i}": x[:, i] for i in range(8)} | {"label": rng.integers(0, 3, 2500)})
    res = audit_frame(df, config_from_dict({"labels": {"num_classes": 3}}), cross_shard=True)
    assert res.layout["name"] == "tabular"
    assert [f for f in res.findings if f.check.startswith("dup.")] == []
    # a real repeat of the features (and label) is still found
    rep = audit_frame(pl.concat([df, df.head(3)]), config_from_dict({"labels": {"num_classes": 3}}))
    (f,) = [f for f in rep.findings if f.check == "dup.exact_in_shard"]
    assert f.count == 3 and list(f.rows) == [2500, 2501, 2502]
    assert "f0" in f.message and "label" in f.message


def test_a_shard_of_labels_alone_skips_the_in_shard_duplicate_check():
    res = audit_frame(pl.DataFrame({"label": [0, 1, 1, 2, 2, 2]}), config_from_dict({}))
    assert [f for f in res.findings if f.check == "dup.exact_in_shard"] == []
    (s,) = [s for s in res.skipped if s.check == "dup.exact_in_shard"]
    assert s.reason.startswith("no content column besides the label") and not s.error


def test_encoder_decoder_rows_run_every_applicable_check(tmp_path):
    """T5/BART style: labels are decoder targets of their own length. No check fails to run."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(REALDATA / "gpt2_tokenizer" / "vocab.json"),
                                           str(REALDATA / "gpt2_tokenizer" / "merges.txt"))
    raw = pl.read_ndjson(REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl")
    ids = [tok.encode(x).ids + [EOS] for x in raw["inputs"]]
    labels = [tok.encode(" " + x.strip()).ids + [EOS] for x in raw["targets"]]
    assert sum(len(a) != len(b) for a, b in zip(ids, labels)) == len(ids)
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": labels})
    toml = ("[tokens]\nvocab_size = 50257\neos_token_id = 50256\npad_token_id = 50256\nmax_seq_len = 1024\n"
            "bos_token_id = 50256\neot_token_ids = [50256]\nmax_position_embeddings = 1024\n")
    for i, dataset in enumerate(("", '[dataset]\nschema = "seq2seq"\n',
                                 '[dataset]\nschema = "seq2seq"\nlayout = "sft_tokenized"\n')):
        # recognized; declared by the built-in contract (two checks used to fail to run: exit 3); and a
        # layout stated against the contract (the rules that assume aligned labels skip, never raise)
        r, rep = _audit_dir(tmp_path / str(i), df, dataset + toml, "--fail-on", "warn")
        assert rep["summary"].get("check_errors", 0) == 0, r.stdout
        if i < 2:
            assert r.returncode == 0, r.stdout
            assert rep["shards"][0]["layout"] == "seq2seq"
            assert [f["check"] for f in rep["shards"][0]["findings"]] == []


def test_tool_calls_are_not_empty_turns():
    call = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    conv = [{"role": "user", "content": "Weather in Paris?", "tool_calls": None},
            {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "tool", "content": "18C, cloudy", "tool_calls": None},
            {"role": "assistant", "content": "It is 18C and cloudy.", "tool_calls": None}]
    empty = [{"role": "user", "content": "hi", "tool_calls": None},
             {"role": "assistant", "content": "  ", "tool_calls": []}]
    res = audit_frame(pl.DataFrame({"messages": [conv, empty]}), config_from_dict({}))
    (f,) = [f for f in res.findings if f.check == "sft.empty_turn"]
    assert list(f.rows) == [1]  # the empty answer is still found; the tool call is not


def _conversations(n: int) -> list[list[dict[str, str]]]:
    rows = json.loads((SHARED / "chat" / "fastchat" / "dummy_conversation.json").read_text(encoding="utf-8"))
    role = {"human": "user", "gpt": "assistant", "system": "system"}
    return [[{"role": role[t["from"]], "content": t["value"]} for t in r["conversations"]] for r in rows[:n]]


@pytest.mark.slow
def test_a_template_without_generation_markers_is_one_finding(tmp_path):
    pytest.importorskip("transformers")
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok", CHATML)  # ChatML without {% generation %}
    convs = _conversations(60)
    path = tmp_path / "chat.parquet"
    pl.DataFrame({"messages": convs}).write_parquet(path)
    rep = datacheck.audit(str(path), {"tokens": {"tokenizer": str(tok), "max_seq_len": 4096, "eos_token_id": 2,
                                                 "eot_token_ids": [2]}})
    assert [(f.check, f.count) for f in rep.findings] == [("sft.assistant_mask_empty", 60)]
    f = rep.findings[0]
    assert str(tok / "tokenizer_config.json") in f.message and "{% generation %}" in f.message
    reasons = {s["check"]: s["reason"] for s in rep.skipped}
    assert "no {% generation %} markers" in reasons["empty.no_supervised_tokens"]


@pytest.mark.slow
def test_with_markers_only_truncated_rows_are_said_to_be_truncated(tmp_path):
    """With markers: a prompt-only conversation is sft.no_assistant_turn's (the template is not blamed),
    and "cut the answer" is said of the rows truncation cut only."""
    pytest.importorskip("transformers")
    gen = ("{% for message in messages %}{% if message['role'] == 'assistant' %}{{ '<|im_start|>assistant\n' }}"
           "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}{% else %}"
           "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endif %}"
           "{% endfor %}")
    tok = tokenizer_copy(TOKENIZER, tmp_path / "tok", gen)
    convs = _conversations(20)
    prompt_only = [{"role": "user", "content": "Tell me a story."}]
    long_prompt = [{"role": "user", "content": "word " * 400}, {"role": "assistant", "content": "ok"}]
    path = tmp_path / "chat.parquet"
    pl.DataFrame({"messages": convs + [prompt_only, long_prompt]}).write_parquet(path)
    rep = datacheck.audit(str(path), {"tokens": {"tokenizer": str(tok), "max_seq_len": 256, "eos_token_id": 2,
                                                 "eot_token_ids": [2]}})
    by = {f.check: f for f in rep.findings}
    assert by["sft.no_assistant_turn"].rows == (20,)
    mask = by["sft.assistant_mask_empty"]  # the long prompt's answer was cut off; the prompt-only row is not here
    assert mask.rows == (21,) and "cut the answer off" in mask.message and "generation" not in mask.message
    none = by["empty.no_supervised_tokens"]
    assert none.rows == (20, 21) and none.message.startswith("2 row(s) have no supervised token:")
    assert "(1 of them only because truncation to max_seq_len 256" in none.message


def test_out_of_vocab_names_a_pad_added_past_the_vocabulary():
    """SmolLM's [PAD] = 49152 with vocab_size 49152: the pad id is the out-of-range id."""
    df = pl.DataFrame({"input_ids": [[1, 20, 30, 49152, 49152], [1, 5, 6, 7, 8]],
                       "attention_mask": [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]})
    res = audit_frame(df, config_from_dict({"tokens": {"vocab_size": 49152, "pad_token_id": 49152}}))
    (f,) = [f for f in res.findings if f.check == "tokens.out_of_vocab"]
    assert f.count == 1 and "pad_token_id = 49152" in f.message and "past the model's vocabulary" in f.message
    other = audit_frame(df.with_columns(pl.Series("input_ids", [[1, 2, 50000, 3, 4]] * 2)),
                        config_from_dict({"tokens": {"vocab_size": 49152, "pad_token_id": 49152}}))
    (g,) = [f for f in other.findings if f.check == "tokens.out_of_vocab"]
    assert "pad_token_id" not in g.message and "vocab mismatch" in g.message


def test_examples_show_the_first_bad_position():
    pos = list(range(40)) + list(range(41, 60))  # the reset is fine at 0; the step 39 -> 41 is not
    df = pl.DataFrame({"input_ids": [[7] * 59, [7] * 59], "position_ids": [list(range(30)) + list(range(29)), pos]})
    res = audit_frame(df, config_from_dict({}))
    (f,) = [f for f in res.findings if f.check == "packing.position_ids_not_reset"]
    assert f.examples[0].position == 40 and "41, expected 40" in f.examples[0].value
    mask = pl.DataFrame({"input_ids": [[5] * 8], "attention_mask": [[1, 1, 1, 0, 0, 1, 0, 0]]})
    res = audit_frame(mask, config_from_dict({"tokens": {"pad_token_id": 0}}))
    (m,) = [f for f in res.findings if f.check == "mask.not_contiguous"]
    assert m.examples[0].position == 5
    (p,) = [f for f in res.findings if f.check == "padding.token_not_pad"]
    assert p.examples[0].position == 3 and "4 masked position(s)" in p.examples[0].value


def test_a_short_hash_prefix_names_the_minimum(tmp_path):
    r = run_cli("report", "2ea1f", "--report-dir", str(tmp_path))
    assert r.returncode == 2 and "at least 6" in r.stderr and "got 5" in r.stderr


def test_checks_lists_what_applies_to_a_layout():
    r = run_cli("checks", "--layout", "packed_lm")
    assert r.returncode == 0
    applies, _, rest = r.stdout.partition("do not apply to packed_lm")
    assert "tokens.out_of_vocab" in applies and "sft.truncated_response" not in applies
    assert "sft.truncated_response" in rest and "pref.identical_pair" in rest
    j = run_cli("checks", "--layout", "dpo", "--format", "json")
    ids = [e["id"] for e in json.loads(j.stdout)["result"]["checks"]]
    # TRL's tokenized pairs hold token ids: the vocabulary checks apply to dpo (to its rows of strings
    # they do not: tests/unit/checks/test_registry_forms.py)
    assert "pref.identical_pair" in ids and "tokens.out_of_vocab" in ids and "sft.truncated_response" not in ids


def test_the_unknown_layout_hint_runs_and_lists_the_layouts(tmp_path):
    """A shard no layout fits says "set [dataset] layout (`datacheck checks --layout` lists the
    layouts)": that command lists every layout with what its rows hold (it was a usage error: exit 2,
    "expected one argument"); a misspelt layout name is refused with the closest one."""
    from datacheck.model.layouts import LAYOUTS

    (tmp_path / "d").mkdir()
    pl.DataFrame({"a": ["x", "y"], "b": ["u", "v"]}).write_parquet(tmp_path / "d" / "s.parquet")
    a = run_cli("audit", str(tmp_path / "d"), "--no-cache", "--no-progress", "--report-dir", str(tmp_path / "r"))
    hint = next(ln for ln in a.stdout.splitlines() if ln.startswith("layout: unknown"))
    cmd = hint.split("`")[1].split()
    assert cmd == ["datacheck", "checks", "--layout"]
    r = run_cli(*cmd[1:])
    assert r.returncode == 0, r.stderr
    listed = [ln.split()[0] for ln in r.stdout.splitlines() if ln and ln.split()[0] in LAYOUTS]
    assert listed == list(LAYOUTS)
    for name, rows in LAYOUTS.items():
        assert rows in r.stdout
    j = run_cli(*cmd[1:], "--format", "json")
    assert [x["name"] for x in json.loads(j.stdout)["result"]["layouts"]] == list(LAYOUTS)
    bad = run_cli("checks", "--layout", "packd_lm")
    assert bad.returncode == 2 and "did you mean 'packed_lm'" in bad.stderr


def _left_padded_chatml(n: int, width: int = 512) -> list[dict[str, list[int]]]:
    """SmolLM2-Instruct's way: FastChat's real conversations in ChatML, tokenized by the real SmolLM
    tokenizer, padded on the LEFT with pad = eos = ``<|im_end|>`` (2) as its tokenizer_config.json
    says (padding_side left), labels only on the assistant turns (-100 elsewhere)."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(TOKENIZER / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    convs = json.loads((SHARED / "chat/fastchat/dummy_conversation.json").read_text(encoding="utf-8"))[:n]
    rows = []
    for c in convs:
        ids: list[int] = []
        labels: list[int] = []
        for turn in c["conversations"]:
            role = "user" if turn["from"] == "human" else "assistant"
            head = tok.encode(f"<|im_start|>{role}\n").ids
            body = tok.encode(turn["value"]).ids + [2]
            ids += head + body
            labels += [-100] * len(head) + (body if role == "assistant" else [-100] * len(body))
        ids, labels = ids[:width], labels[:width]
        pad = width - len(ids)
        rows.append({"input_ids": [2] * pad + ids, "attention_mask": [0] * pad + [1] * len(ids),
                     "labels": [-100] * pad + labels})
    return rows


def test_a_left_padded_shard_without_padding_side_is_judged_on_its_own_side():
    """[tokens] padding_side unset: a left-padded SFT shard (SmolLM2's tokenizer pads on the left) is
    not ``mask.not_contiguous`` on every row, and ``sft.double_bos`` looks at the first real token."""
    rows = _left_padded_chatml(60)
    padded = [i for i, r in enumerate(rows) if r["attention_mask"][0] == 0]
    assert len(padded) == len(rows)  # every row is padded on the left: what the audit must accept
    hole, dbl = 3, 7
    rows[hole]["attention_mask"][-3] = 0  # a hole inside the real tokens: still a defect
    first = rows[dbl]["attention_mask"].index(1)
    rows[dbl]["input_ids"][first - 1] = 1  # <|im_start|> twice: the template's bos and the tokenizer's
    rows[dbl]["attention_mask"][first - 1] = 1
    facts = {"tokens": {"vocab_size": 49152, "pad_token_id": 2, "eos_token_id": 2, "bos_token_id": 1}}
    res = audit_frame(pl.DataFrame(rows), config_from_dict(facts))
    (m,) = [f for f in res.findings if f.check == "mask.not_contiguous"]
    assert m.rows == (hole,) and "padding_side=left (recognized" in m.message
    (b,) = [f for f in res.findings if f.check == "sft.double_bos"]
    assert b.rows == (dbl,)
    # the same rows declared right-padded: every padded row is against the side the config names
    res = audit_frame(pl.DataFrame(rows), config_from_dict({"tokens": {**facts["tokens"], "padding_side": "right"}}))
    (m,) = [f for f in res.findings if f.check == "mask.not_contiguous"]
    assert m.count == len(rows)


@pytest.mark.parametrize("defect", ["all_padding", "hole_at_the_end"])
def test_one_row_padded_at_both_ends_leaves_a_left_padded_shard_left_padded(defect):
    """[tokens] padding_side unset: one row of a left-padded shard whose mask starts AND ends with a 0
    (all padding, or a hole on its last real token) tells no side. It once made the shard's side
    unknown, judged right-padded: every clean row was ``mask.not_contiguous``."""
    rows = _left_padded_chatml(60)
    bad = 5
    assert all(r["attention_mask"][0] == 0 and r["attention_mask"][-1] == 1 for r in rows)
    if defect == "all_padding":
        rows[bad]["attention_mask"] = [0] * len(rows[bad]["attention_mask"])
        rows[bad]["labels"] = [-100] * len(rows[bad]["labels"])
    else:
        rows[bad]["attention_mask"][-1] = 0
        rows[bad]["labels"][-1] = -100
    facts = {"tokens": {"vocab_size": 49152, "pad_token_id": 2, "eos_token_id": 2, "bos_token_id": 1}}
    res = audit_frame(pl.DataFrame(rows), config_from_dict(facts))
    by = {f.check: f for f in res.findings}
    if defect == "all_padding":
        assert by["empty.all_padding"].rows == (bad,)
        assert "mask.not_contiguous" not in by or by["mask.not_contiguous"].rows == (bad,)
    else:
        assert by["mask.not_contiguous"].rows == (bad,)
        assert "padding_side=left (recognized" in by["mask.not_contiguous"].message
