"""``[tokens] tokenizer`` supplies the facts the config leaves unset (vocab_size, pad/eos/bos), as an
ML engineer who names the tokenizer expects: token ids are checked against the ids it can produce,
padding against its pad token, end-of-turn rules against its eos; values written in the config win;
a config vocab_size below the tokenizer's count is a config error naming both numbers; the report
says which facts came from the tokenizer, and an edited tokenizer re-audits.

The shards are tokenized here with the ``tokenizers`` library from the real tokenizers of ../shared
(SmolLM-135M, PROVENANCE.md: 49152 base tokens plus the added [PAD] = 49152, eos = bos =
<|endoftext|> = 0; GPT-2's bare vocab.json + merges.txt: 50,257 tokens, no pad) over Tiny
Shakespeare; every expected id and count is read here from the tokenizer files."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import REALDATA, SHARED, run_cli
from gatehelp import normalized

import datacheck
from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.execute.cache import cache_salt
from datacheck.model.config import config_from_dict
from datacheck.model.errors import ConfigError

tokenizers = pytest.importorskip("tokenizers")

SMOLLM = SHARED / "chat/tokenizers/smollm_135m"
GPT2 = REALDATA / "gpt2_tokenizer"
TEXT = REALDATA / "tinyshakespeare/input.txt"
ROWS = 40
IGNORE = -100

pytestmark = pytest.mark.skipif(not (SMOLLM.is_dir() and GPT2.is_dir() and TEXT.is_file()),
                                reason="shared tokenizers or Tiny Shakespeare not present")


def _smollm() -> dict[str, int]:
    """SmolLM-135M's facts from its files: the id count (base plus added tokens), pad, eos/bos."""
    tj = json.loads((SMOLLM / "tokenizer.json").read_text())
    base, added = tj["model"]["vocab"], {t["content"]: t["id"] for t in tj["added_tokens"]}
    pad = json.loads((SMOLLM / "added_tokens.json").read_text())["[PAD]"]
    eos = {**base, **added}["<|endoftext|>"]
    return {"count": max([*base.values(), *added.values()]) + 1, "pad": pad, "eos": eos,
            "im_end": {**base, **added}["<|im_end|>"]}


S = _smollm() if SMOLLM.is_dir() else {}


def _paragraphs() -> list[str]:
    text = TEXT.read_text(encoding="utf-8")
    return [p for p in text.split("\n\n") if p.strip()][:ROWS]


def _encode(folder: Path) -> list[list[int]]:
    if (folder / "tokenizer.json").is_file():
        tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        tok.no_padding()
        tok.no_truncation()
    else:
        tok = tokenizers.ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    return [tok.encode(p).ids for p in _paragraphs()]


def _write(folder: Path, columns: dict[str, list]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pl.DataFrame(columns).write_parquet(folder / "part-0.parquet")
    return folder


def _padded(ids: list[list[int]], pad: int) -> dict[str, list]:
    """Right padding to the longest row with ``pad``, attention_mask 1 on the real tokens."""
    width = max(len(r) for r in ids)
    return {"input_ids": [r + [pad] * (width - len(r)) for r in ids],
            "attention_mask": [[1] * len(r) + [0] * (width - len(r)) for r in ids]}


def _audit(data: Path, tokens: dict, **kw) -> datacheck.Report:
    return datacheck.audit(str(data), {"tokens": tokens, **kw}, cache_dir=None, fail_on="never")


def _findings(rep, check: str) -> list:
    return [f for f in rep.findings if f.check == check]


def _skips(rep) -> dict[str, str]:
    return {s["check"]: s["reason"] for s in rep.skipped}


# ------------------------------------------------------------------------------------ 1. vocab_size
def test_out_of_vocab_runs_on_the_tokenizers_count_and_finds_the_planted_id(tmp_path):
    ids = _encode(SMOLLM)
    assert S["count"] == 49153
    clean = _write(tmp_path / "clean", {"input_ids": ids})
    rep = _audit(clean, {"tokenizer": str(SMOLLM)})
    assert "tokens.out_of_vocab" not in _skips(rep)  # it ran (it skipped with "no vocab_size" before)
    assert _findings(rep, "tokens.out_of_vocab") == []
    assert rep.tokenizer_facts == {"tokenizer": str(SMOLLM), "facts": {
        "vocab_size": S["count"], "pad_token_id": S["pad"], "eos_token_id": S["eos"], "bos_token_id": S["eos"]}}

    row, pos = 17, 3
    bad = [list(r) for r in ids]
    bad[row][pos] = S["count"]  # the first id the tokenizer cannot produce
    bad[5][1] = S["pad"]  # its added [PAD]: an id it holds, no finding
    rep = _audit(_write(tmp_path / "bad", {"input_ids": bad}), {"tokenizer": str(SMOLLM)})
    (f,) = _findings(rep, "tokens.out_of_vocab")
    assert (f.count, f.rows) == (1, (row,))
    assert f"vocab_size={S['count']}" in f.message and f"the offending id is {S['count']}" in f.message
    assert f.examples[0].row == row and f.examples[0].position == pos


def test_without_the_tokenizer_out_of_vocab_is_skipped(tmp_path):
    """The same shard without [tokens] tokenizer: no vocab_size, so the check cannot run."""
    rep = _audit(_write(tmp_path / "clean", {"input_ids": _encode(SMOLLM)}), {})
    assert "tokens.out_of_vocab" in _skips(rep) and rep.tokenizer_facts is None


# ------------------------------------------------------------------------------------ 2. pad / eos / bos
def test_padding_checks_use_the_tokenizers_pad(tmp_path):
    cols = _padded(_encode(SMOLLM), S["pad"])
    rep = _audit(_write(tmp_path / "clean", cols), {"tokenizer": str(SMOLLM)})
    skips = _skips(rep)
    assert "padding.token_not_pad" not in skips and "padding.pad_attended" not in skips
    assert _findings(rep, "padding.token_not_pad") == [] and _findings(rep, "padding.pad_attended") == []

    short = min(range(ROWS), key=lambda i: sum(cols["attention_mask"][i]))
    real = sum(cols["attention_mask"][short])
    cols["input_ids"][short][real] = 5  # a padding position (mask 0) that holds no pad id
    cols["input_ids"][9][0] = S["pad"]  # an attended position holding the pad id
    rep = _audit(_write(tmp_path / "bad", cols), {"tokenizer": str(SMOLLM)})
    assert _findings(rep, "padding.token_not_pad")[0].rows == (short,)
    assert _findings(rep, "padding.pad_attended")[0].rows == (9,)


def test_a_tokenizer_without_pad_leaves_pad_unset(tmp_path):
    """GPT-2 (vocab.json + merges.txt) defines no pad token: none is made up, the padding checks skip
    exactly as with no tokenizer at all; its vocabulary still bounds the ids."""
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    cols = _padded(_encode(GPT2), vocab["<|endoftext|>"])
    data = _write(tmp_path / "gpt2", cols)
    rep = _audit(data, {"tokenizer": str(GPT2)})
    assert rep.tokenizer_facts == {"tokenizer": str(GPT2), "facts": {"vocab_size": len(vocab)}}
    before = _skips(_audit(data, {}))
    for cid in ("padding.token_not_pad", "padding.pad_attended"):
        assert _skips(rep)[cid] == before[cid]
    assert "tokens.out_of_vocab" not in _skips(rep) and _findings(rep, "tokens.out_of_vocab") == []


def _sft(ids: list[list[int]], eos: int, unsupervised: set[int], double_bos: set[int], bos: int) -> dict[str, list]:
    """SFT rows: the first half of each paragraph's ids is the prompt (labels -100), the rest the
    response, closed by ``eos`` (supervised, except in the rows of ``unsupervised``); the rows of
    ``double_bos`` start with ``bos`` twice."""
    input_ids, labels = [], []
    for i, r in enumerate(ids):
        cut = len(r) // 2
        head = [bos, bos] if i in double_bos else []
        row = head + r + [eos]
        lab = [IGNORE] * (len(head) + cut) + r[cut:] + [IGNORE if i in unsupervised else eos]
        input_ids.append(row)
        labels.append(lab)
    return {"input_ids": input_ids, "labels": labels}


def test_eos_and_bos_come_from_the_tokenizer(tmp_path):
    cols = _sft(_encode(SMOLLM), S["eos"], unsupervised={4, 11}, double_bos={7}, bos=S["eos"])
    rep = _audit(_write(tmp_path / "sft", cols), {"tokenizer": str(SMOLLM)},
                 dataset={"layout": "sft_tokenized"}, labels={"ignore_index": IGNORE})
    (eot,) = _findings(rep, "sft.eot_unsupervised")
    assert set(eot.rows) == {4, 11}
    (bos,) = _findings(rep, "sft.double_bos")
    assert bos.rows == (7,)


# ------------------------------------------------------------------------------------ 3. the config wins
def test_values_in_the_config_win(tmp_path):
    """eos_token_id = <|im_end|> in the config: the end-of-turn rule reads it, not the tokenizer's
    <|endoftext|>; vocab_size above the tokenizer's count (a padded embedding) is kept."""
    ids = _encode(SMOLLM)
    cols = _sft(ids, S["im_end"], unsupervised={3}, double_bos=set(), bos=S["eos"])
    cols["input_ids"][8][2] = S["count"]  # past the tokenizer's ids, inside the config's vocab_size
    cols["input_ids"][9][2] = S["count"] + 64  # past both
    rep = _audit(_write(tmp_path / "sft", cols),
                 {"tokenizer": str(SMOLLM), "eos_token_id": S["im_end"], "vocab_size": S["count"] + 64},
                 dataset={"layout": "sft_tokenized"}, labels={"ignore_index": IGNORE})
    assert rep.tokenizer_facts == {"tokenizer": str(SMOLLM), "facts": {"pad_token_id": S["pad"],
                                                                       "bos_token_id": S["eos"]}}
    assert _findings(rep, "sft.eot_unsupervised")[0].rows == (3,)
    assert _findings(rep, "tokens.out_of_vocab")[0].rows == (9,)


def test_a_config_vocab_size_below_the_tokenizers_count_is_a_config_error(tmp_path):
    data = _write(tmp_path / "clean", {"input_ids": _encode(SMOLLM)})
    small = S["count"] - 1  # SmolLM's model config says 49152: its added [PAD] has no embedding row
    with pytest.raises(ConfigError) as err:
        _audit(data, {"tokenizer": str(SMOLLM), "vocab_size": small})
    assert err.value.key == "tokens.vocab_size"
    msg = str(err.value)
    assert f"[tokens] vocab_size = {small} is smaller than the {S['count']} ids the tokenizer" in msg
    assert f"at least {S['count']}" in msg

    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{SMOLLM}"\nvocab_size = {small}\n')
    res = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
                  "--no-progress", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert f"vocab_size = {small} is smaller than the {S['count']} ids" in res.stderr


# ------------------------------------------------------------------------------------ report and cache
def test_the_report_says_which_facts_came_from_the_tokenizer(tmp_path):
    data = _write(tmp_path / "data", {"input_ids": _encode(SMOLLM)})
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{SMOLLM}"\neos_token_id = {S["im_end"]}\n')
    res = run_cli("audit", str(data), "--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"),
                  "--no-progress", "--output", str(tmp_path / "rep.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    want = {"vocab_size": S["count"], "pad_token_id": S["pad"], "bos_token_id": S["eos"]}
    assert json.loads((tmp_path / "rep.json").read_text())["tokenizer_facts"] == {"tokenizer": str(SMOLLM),
                                                                                  "facts": want}
    line = ", ".join(f"{k} = {v}" for k, v in want.items())
    assert f"config: {cfg}; [tokens] {line} from the tokenizer {str(SMOLLM)!r}\n" in res.stdout


def test_an_edited_tokenizer_re_audits(tmp_path):
    """The cache key holds the tokenizer's bytes and the facts it gave: a token added to the
    tokenizer makes the planted id a real one, and the cached finding is not served."""
    tok = tmp_path / "tok"
    shutil.copytree(SMOLLM, tok)
    bad = _encode(SMOLLM)
    bad[6][0] = S["count"]
    data = _write(tmp_path / "data", {"input_ids": bad})
    cache = tmp_path / "cache"

    def audit() -> datacheck.Report:
        return datacheck.audit(str(data), {"tokens": {"tokenizer": str(tok)}}, cache_dir=str(cache), fail_on="never")

    assert _findings(audit(), "tokens.out_of_vocab")[0].rows == (6,)
    assert _findings(audit(), "tokens.out_of_vocab")[0].rows == (6,)  # served from the cache alike
    tj = json.loads((tok / "tokenizer.json").read_text())
    tj["added_tokens"].append({**tj["added_tokens"][-1], "id": S["count"], "content": "[EXTRA]"})
    (tok / "tokenizer.json").write_text(json.dumps(tj))
    rep = audit()
    assert rep.tokenizer_facts["facts"]["vocab_size"] == S["count"] + 1
    assert _findings(rep, "tokens.out_of_vocab") == []


def test_the_cache_key_holds_the_tokenizers_bytes(tmp_path):
    """An edit of the tokenizer folder that leaves every fact as it was still changes the key of
    every shard result (a template or a merge rule decides what is rendered)."""
    tok = tmp_path / "tok"
    shutil.copytree(SMOLLM, tok)

    def salt() -> str:
        return cache_salt(with_tokenizer_facts(config_from_dict({"tokens": {"tokenizer": str(tok)}})))

    first = salt()
    doc = json.loads((tok / "tokenizer_config.json").read_text())
    (tok / "tokenizer_config.json").write_text(json.dumps({**doc, "model_max_length": 2048}))
    assert salt() != first


def test_parts_merge_into_the_single_jobs_report(tmp_path):
    """A split audit takes the same facts in every part, and the merge says where they came from,
    byte for byte as the single job (created_at aside)."""
    ids = _encode(SMOLLM)
    ids[2][1] = S["count"]
    data = tmp_path / "data"
    for k in range(3):
        _write(data / f"s{k}", {"input_ids": ids[k::3]})
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{SMOLLM}"\n')
    common = ("--config", str(cfg), "--no-cache", "--report-dir", str(tmp_path / "r"), "--no-progress")
    single = run_cli("audit", str(data), *common, "-o", str(tmp_path / "single.json"), cwd=tmp_path)
    assert single.returncode == 1, single.stderr
    parts = []
    for k in range(2):
        out = tmp_path / "parts" / f"part-{k}.json"
        r = run_cli("audit", str(data), *common, "--num-parts", "2", "--part", str(k), "-o", str(out), cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        parts.append(str(out))
    m = run_cli("merge", *parts, "-o", str(tmp_path / "merged.json"), "--report-dir", str(tmp_path / "r"),
                cwd=tmp_path)
    assert m.returncode == 1, m.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["tokenizer_facts"]["facts"]["vocab_size"] == S["count"]
    assert [f["rows"] for s in merged["shards"] for f in s["findings"] if f["check"] == "tokens.out_of_vocab"] == [[0]]
    assert normalized((tmp_path / "merged.json").read_text()) == normalized((tmp_path / "single.json").read_text())


MEGATRON = REALDATA / "megatron_gpt2_openwebtext"  # .bin/.idx (uint16, max id 4999) + gpt2-tiny-vocab.json/-merges.txt


@pytest.mark.skipif(not MEGATRON.is_dir(), reason="shared Megatron data not present")
@pytest.mark.parametrize("named", ["", "gpt2-tiny-vocab.json"])
def test_a_megatron_folders_prefixed_vocabulary_gates_its_ids(tmp_path, named):
    """A Megatron user names the tokenizer that ships beside the .bin/.idx (``gpt2-tiny-vocab.json`` +
    ``gpt2-tiny-merges.txt``, Megatron's --vocab-file/--merge-file names), as its folder or its
    vocab file: the vocabulary size comes from it and tokens.out_of_vocab runs and passes (PROVENANCE.md:
    max id 4999 under the 5,000-token vocabulary). Both were a usage error (exit 2)."""
    bound = max(json.loads((MEGATRON / "gpt2-tiny-vocab.json").read_text()).values()) + 1
    tok = MEGATRON / named if named else MEGATRON
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f'[tokens]\ntokenizer = "{tok}"\n')
    res = run_cli("audit", str(MEGATRON / "meg-gpt2-openwebtext_text_document.bin"), "--config", str(cfg),
                  "--no-cache", "--report-dir", str(tmp_path / "r"), "--no-progress", "--fail-on", "warn",
                  "--output", str(tmp_path / "rep.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["tokenizer_facts"]["facts"] == {"vocab_size": bound}
    assert "tokens.out_of_vocab" not in {s["check"] for s in rep["skipped"]}
