"""A gate you can leave on: clean, real data of every standard layout passes ``datacheck audit
--fail-on warn`` with no finding at warn or above, and each shard's layout is the one it was built as.

Every example is built here from the shared real material (../shared/realdata, ../shared/chat; see
their PROVENANCE.md) with the real tokenizers there, the way the field's tools lay the rows out:

- ``packed_lm``: Hugging Face ``run_clm``'s ``group_texts`` over tinyshakespeare tokenized with GPT-2's
  BPE (every row ``block_size`` = 1024 ids, ``labels = input_ids``, no padding; eos = pad = 50256);
- ``causal_lm``: the same paragraphs one per row, right-padded to the longest with the eos id, labels
  ``-100`` on padding (``DataCollatorForLanguageModeling(mlm=False)``);
- ``text_classification``: dair-ai emotion (texts deduplicated: the train split repeats 31) through
  the MiniLM BERT WordPiece tokenizer (``input_ids``, ``token_type_ids``, ``attention_mask`` padded to
  128, as its tokenizer.json fixes) and the 6 class ids;
- ``token_classification``: tinyshakespeare's speaker lines as words tagged ``B-PER``/``I-PER`` (the
  speaker's name) and ``O``, aligned to BERT word pieces as the token-classification examples do
  (first piece labelled, other pieces and special tokens ``-100``);
- ``seq2seq``: AG News prompts (``inputs`` -> ``targets``) as T5-style rows: encoder ids and decoder
  labels of their own length, GPT-2 BPE with eos;
- ``chat_sft``: FastChat's ShareGPT conversations rendered through SmolLM2's ChatML template with
  ``{% generation %}`` markers (``[tokens] tokenizer``);
- ``dpo``: LLaMA-Factory's preference demo (ShareGPT prompt, chosen/rejected);
- ``kto``: the same pairs unpaired (prompt, completion, Boolean label), TRL's KTO form;
- ``packed_sft``: SmolLM-tokenized ChatML conversations (prompt labels ``-100``) packed four per row
  by transformers' ``DataCollatorWithFlattening`` (position ids reset per sequence);
- ``tabular``: 2,500 rows of 8 float features and a 3-class label (no repeated row);
- ``regression``: 8 float features and a float target.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from checkhelp import TOKENIZER
from conftest import REALDATA, SHARED, run_cli

tokenizers = pytest.importorskip("tokenizers")

GPT2 = REALDATA / "gpt2_tokenizer"
BERT = REALDATA / "minilm_bert_tokenizer"
CHAT = SHARED / "chat"
EOS = 50256
#: SmolLM2's published ChatML template with the assistant content and its <|im_end|> between
#: generation markers (as TRL's assistant-only loss needs them)
CHATML_GEN = ("{% for message in messages %}{% if message['role'] == 'assistant' %}"
              "{{ '<|im_start|>assistant\n' }}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{{ '\n' }}{% else %}"
              "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
              "{% endif %}{% endfor %}")
SHAREGPT = {"human": "user", "gpt": "assistant", "system": "system"}


def _gpt2():
    return tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))


def _bert():
    tok = tokenizers.Tokenizer.from_file(str(BERT / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _paragraphs(n: int) -> list[str]:
    text = (REALDATA / "tinyshakespeare" / "input.txt").read_text(encoding="utf-8")
    return [p for p in text.split("\n\n") if p.strip()][:n]


def _write(folder: Path, df: pl.DataFrame, toml: str) -> Path:
    folder.mkdir(parents=True)
    df.write_parquet(folder / "train.parquet")
    (folder / "datacheck.toml").write_text(toml, encoding="utf-8")
    return folder


# ----------------------------------------------------------------------------------- the builders


def packed_lm(d: Path) -> Path:
    tok, block = _gpt2(), 1024
    ids: list[int] = []
    for p in _paragraphs(2000):
        ids += tok.encode(p).ids + [EOS]
    rows = [ids[i:i + block] for i in range(0, len(ids) - block + 1, block)]  # group_texts drops the remainder
    df = pl.DataFrame({"input_ids": rows, "attention_mask": [[1] * block for _ in rows], "labels": rows},
                      schema={"input_ids": pl.List(pl.Int32), "attention_mask": pl.List(pl.Int8),
                              "labels": pl.List(pl.Int64)})
    return _write(d, df, f"[tokens]\nvocab_size = 50257\neos_token_id = {EOS}\npad_token_id = {EOS}\n"
                         f"max_seq_len = {block}\n")


def causal_lm(d: Path) -> Path:
    tok = _gpt2()
    seqs = [tok.encode(p).ids[:127] + [EOS] for p in _paragraphs(600)]
    n = max(map(len, seqs))
    ids = [s + [EOS] * (n - len(s)) for s in seqs]
    mask = [[1] * len(s) + [0] * (n - len(s)) for s in seqs]
    labels = [s + [-100] * (n - len(s)) for s in seqs]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return _write(d, df, f"[tokens]\nvocab_size = 50257\neos_token_id = {EOS}\npad_token_id = {EOS}\n"
                         "max_seq_len = 1024\n")


def text_classification(d: Path) -> Path:
    tok = _bert()
    tok.enable_truncation(128)
    tok.enable_padding(length=128, pad_id=0, pad_token="[PAD]")
    raw = pl.read_csv(REALDATA / "emotion" / "train.txt", separator=";").unique("text", keep="first",
                                                                                maintain_order=True).head(1500)
    names = sorted(raw["label_name"].unique().to_list())
    enc = tok.encode_batch(raw["text"].to_list())
    df = pl.DataFrame({"input_ids": [e.ids for e in enc], "token_type_ids": [e.type_ids for e in enc],
                       "attention_mask": [e.attention_mask for e in enc],
                       "label": [names.index(x) for x in raw["label_name"]]})
    return _write(d, df, "[tokens]\nvocab_size = 30522\npad_token_id = 0\ntype_vocab_size = 2\nmax_seq_len = 128\n"
                         f"[labels]\nnum_classes = {len(names)}\n")


def token_classification(d: Path) -> Path:
    tok = _bert()
    tags = {"O": 0, "B-PER": 1, "I-PER": 2}
    seen: set[tuple[str, ...]] = set()
    words_rows, tag_rows = [], []
    for p in _paragraphs(3000):
        lines = p.split("\n")
        m = re.fullmatch(r"([A-Z][A-Za-z ]+):", lines[0])
        if not m or len(lines) < 2:
            continue
        name = m.group(1).split()
        body = re.findall(r"[A-Za-z']+|[.,;:!?]", " ".join(lines[1:3]))[:40]
        words = tuple(name + [":"] + body)
        if words in seen:
            continue
        seen.add(words)
        words_rows.append(list(words))
        tag_rows.append([tags["B-PER"]] + [tags["I-PER"]] * (len(name) - 1) + [tags["O"]] * (len(body) + 1))
    ids, labels, pieces = [], [], set()
    for words, wt in zip(words_rows, tag_rows):
        enc = tok.encode(words, is_pretokenized=True)
        if tuple(enc.ids) in pieces:  # the uncased vocabulary makes some lines one (a real repeat)
            continue
        pieces.add(tuple(enc.ids))
        prev, lab = None, []
        for w in enc.word_ids:
            lab.append(-100 if w is None or w == prev else wt[w])
            prev = w
        ids.append(enc.ids)
        labels.append(lab)
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": labels})
    return _write(d, df, "[tokens]\nvocab_size = 30522\npad_token_id = 0\nmax_seq_len = 512\n"
                         "[labels]\nnum_classes = 3\n")


def seq2seq(d: Path) -> Path:
    tok = _gpt2()
    raw = pl.read_ndjson(REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl")
    ids = [tok.encode(x).ids + [EOS] for x in raw["inputs"]]
    labels = [tok.encode(" " + x.strip()).ids + [EOS] for x in raw["targets"]]
    df = pl.DataFrame({"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids], "labels": labels})
    return _write(d, df, f"[tokens]\nvocab_size = 50257\neos_token_id = {EOS}\npad_token_id = {EOS}\n"
                         "max_seq_len = 1024\n")


def _tokenizer_with_template(d: Path) -> Path:
    from checkhelp import tokenizer_copy
    return tokenizer_copy(TOKENIZER, d / "tokenizer", CHATML_GEN)


def _fastchat(n: int) -> list[list[dict[str, str]]]:
    rows = json.loads((CHAT / "fastchat" / "dummy_conversation.json").read_text(encoding="utf-8"))
    out, seen = [], set()
    for r in rows:
        conv = [{"role": SHAREGPT[t["from"]], "content": t["value"]} for t in r["conversations"]]
        key = json.dumps(conv)
        if key not in seen:
            seen.add(key)
            out.append(conv)
    return out[:n]


def chat_sft(d: Path) -> Path:
    d.mkdir(parents=True)
    tokdir = _tokenizer_with_template(d)
    pl.DataFrame({"messages": _fastchat(120)}).write_parquet(d / "train.parquet")
    (d / "datacheck.toml").write_text(f'[tokens]\ntokenizer = "{tokdir}"\nmax_seq_len = 4096\n'
                                      "eos_token_id = 2\neot_token_ids = [2]\n", encoding="utf-8")
    return d


def _pairs() -> list[dict]:
    """LLaMA-Factory's 300 preference rows without their 5 exact repeats (a real defect of the file,
    which dup.exact_in_shard reports)."""
    rows = json.loads((CHAT / "llamafactory" / "dpo_en_demo.json").read_text(encoding="utf-8"))
    keep: dict[str, dict] = {}
    for r in rows:
        keep.setdefault(json.dumps(r, sort_keys=True), r)
    return list(keep.values())


def dpo(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "train.json").write_text(json.dumps(_pairs()), encoding="utf-8")
    (d / "datacheck.toml").write_text("[dataset]\nformat = \"json\"\n", encoding="utf-8")
    return d


def kto(d: Path) -> Path:
    prompts, completions, labels = [], [], []
    for r in _pairs():
        prompt = "\n".join(t["value"] for t in r["conversations"])
        for side, good in (("chosen", True), ("rejected", False)):
            prompts.append(prompt)
            completions.append(r[side]["value"])
            labels.append(good)
    df = pl.DataFrame({"prompt": prompts, "completion": completions, "label": labels})
    return _write(d, df, "")


def packed_sft(d: Path) -> Path:
    from transformers import AutoTokenizer, DataCollatorWithFlattening
    tokdir = _tokenizer_with_template(d / "tok")
    tok = AutoTokenizer.from_pretrained(str(tokdir))
    examples = []
    for conv in _fastchat(160):
        out = tok.apply_chat_template(conv, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        ids, am = out["input_ids"], out["assistant_masks"]
        if len(ids) > 900:
            continue
        examples.append({"input_ids": ids, "labels": [t if m else -100 for t, m in zip(ids, am)]})
    collate = DataCollatorWithFlattening(return_tensors="np")
    rows = [collate(examples[i:i + 4]) for i in range(0, len(examples) - 3, 4)]
    df = pl.DataFrame({k: [r[k][0].tolist() for r in rows] for k in ("input_ids", "labels", "position_ids")})
    out_dir = d / "data"
    return _write(out_dir, df, "[tokens]\nvocab_size = 49152\neos_token_id = 2\neot_token_ids = [2]\n"
                               "max_seq_len = 4096\nmax_position_embeddings = 2048\n")


def tabular(d: Path) -> Path:
    rng = np.random.default_rng(23)
    x = rng.normal(size=(2500, 8))
    y = (x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 2] > 1).astype(int)
    df = pl.DataFrame({f"f{i}": x[:, i] for i in range(8)} | {"label": y})
    return _write(d, df, "[labels]\nnum_classes = 3\n")


def regression(d: Path) -> Path:
    rng = np.random.default_rng(24)
    x = rng.normal(size=(2000, 8))
    y = x @ rng.normal(size=8) + rng.normal(scale=0.1, size=2000)
    df = pl.DataFrame({f"f{i}": x[:, i] for i in range(8)} | {"target": y})
    return _write(d, df, "")


#: layout -> the builder of its clean example
CORPUS = {
    "packed_lm": packed_lm, "causal_lm": causal_lm, "text_classification": text_classification,
    "token_classification": token_classification, "seq2seq": seq2seq, "chat_sft": chat_sft, "dpo": dpo,
    "kto": kto, "packed_sft": packed_sft, "tabular": tabular, "regression": regression,
}
#: the examples that render or collate through transformers (seconds each)
SLOW = {"chat_sft", "packed_sft"}


def audit(folder: Path, tmp: Path) -> tuple[int, dict, str]:
    """``datacheck audit FOLDER --fail-on warn`` (JSON report and text output): exit code, report, text."""
    out = tmp / f"{folder.name}.json"
    r = run_cli("audit", str(folder), "--config", str(folder / "datacheck.toml"), "--fail-on", "warn",
                "--no-cache", "--no-progress", "--report-dir", str(tmp / "reports"), "--output", str(out))
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, json.loads(out.read_text(encoding="utf-8")), r.stdout


@pytest.mark.parametrize("layout", [pytest.param(k, marks=pytest.mark.slow) if k in SLOW else k for k in CORPUS])
def test_clean_data_of_every_layout_passes_the_gate(layout, tmp_path):
    folder = CORPUS[layout](tmp_path / layout)
    rc, rep, text = audit(folder, tmp_path)
    loud = [(s["path"], f["check"], f["severity"], f["count"], f["message"][:200])
            for s in rep["shards"] for f in s["findings"] if f["severity"] in ("warn", "error")]
    loud += [("", f["check"], f["severity"], f.get("count"), f["message"][:200])
             for f in rep["findings"] if f["severity"] in ("warn", "error")]
    assert loud == [] and rc == 0, (loud, text)
    assert rep["summary"].get("check_errors", 0) == 0
    assert {(s["layout"], s["layout_source"]) for s in rep["shards"]} == {(layout, "recognized")}, text
    assert f"layout: {layout} (recognized" in text
