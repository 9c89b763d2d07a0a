"""``datacheck inspect`` shows the layout ``datacheck audit`` reports for the same shard and config
(one decision: :func:`datacheck.derive.layout.shard_layout`, a stated ``[dataset] layout`` first), and
its token supervision view follows that layout: in ``seq2seq`` the labels are the decoder's targets,
never one label per input token.

Material: every shard set of ../shared/realdata and ../shared/chat that datacheck reads, and the real
layout corpus of ``tests/e2e/gate/test_layout_corpus.py`` (GPT-2 ``group_texts`` rows, padded causal LM,
BERT classification, NER tags, T5-style AG News, KTO, tabular, regression; chat SFT and packed SFT
through transformers, slow)."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from conftest import REALDATA, ROOT, SHARED, run_cli

CHAT = SHARED / "chat"
GPT2 = REALDATA / "gpt2_tokenizer"

#: every shard set of the shared real material datacheck reads (emotion's ``.txt`` files are CSV with
#: ``;``: copied as ``.csv`` with that separator); the layouts they hold (audit's view, asserted equal
#: to inspect's below): text_classification, causal_lm, chat_sft, dpo, unknown (binary formats of images
#: and raw text, AG News prompts without token ids)
REAL = [
    REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl",
    REALDATA / "agnews_prompts_jsonl" / "ag_news_prompt_text_document.bin",
    REALDATA / "dkhate_danish_offensive" / "raw_parquet" / "test-00000-of-00001.parquet",
    REALDATA / "dkhate_danish_offensive" / "dkhate_processed_hf" / "test",
    REALDATA / "dkhate_danish_offensive" / "dkhate_mbert" / "test",
    REALDATA / "dkhate_danish_offensive" / "dkhate_xlmr" / "test",
    REALDATA / "sst2_vi_glue_parquet" / "validation-00000-of-00001.parquet",
    REALDATA / "megatron_gpt2_openwebtext" / "meg-gpt2-openwebtext_text_document.bin",
    REALDATA / "megatron_toy_duplicates" / "my-gpt2_text_document.bin",
    REALDATA / "mds_fixtures" / "naive_MDSdataset",
    REALDATA / "mds_fixtures" / "joining_sample_dataset",
    REALDATA / "webdataset_text",
    REALDATA / "litdata_images_partial",
    CHAT / "fastchat" / "dummy_conversation.json",
    CHAT / "hh_rlhf" / "harmless-base_test.jsonl.gz",
    CHAT / "llamafactory" / "dpo_en_demo.json",
    CHAT / "llamafactory" / "glaive_toolcall_en_demo.json",
    CHAT / "llamafactory" / "identity.json",
    CHAT / "llamafactory" / "v1_dpo_demo.jsonl",
    CHAT / "llamafactory" / "v1_sft_demo.jsonl",
]


def _corpus():
    """The layout corpus builders (``CORPUS``, ``SLOW``) of the gate's zero-false-alarm test."""
    path = ROOT / "tests" / "e2e" / "gate" / "test_layout_corpus.py"
    spec = importlib.util.spec_from_file_location("layout_corpus_builders", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _audit_layouts(paths: list[str], config: Path, tmp: Path) -> dict[str, dict]:
    """{shard path: {name, source, why}} from ``datacheck audit``'s JSON report."""
    out = tmp / "report.json"
    r = run_cli("audit", *paths, "--config", str(config), "--no-cache", "--no-progress", "--fail-on", "never",
                "--report-dir", str(tmp / "reports"), "--output", str(out))
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text(encoding="utf-8"))
    return {s["path"]: {"name": s["layout"], "source": s["layout_source"], "why": s["layout_why"]}
            for s in rep["shards"] if s["rows"] is not None}


def _inspect(paths: list[str], config: Path, *extra: str) -> dict:
    r = run_cli("inspect", *paths, "--config", str(config), "--format", "json", *extra)
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)["result"]


def _inspect_layouts(paths: list[str], config: Path) -> dict[str, dict]:
    return {s["path"]: s["layout"] for s in _inspect(paths, config)["shards"] if s["rows"] is not None}


@pytest.mark.realdata
@pytest.mark.parametrize("target", REAL, ids=lambda p: p.relative_to(SHARED).as_posix())
def test_inspect_shows_the_audits_layout_on_real_data(target, tmp_path):
    if not target.exists():
        pytest.skip(f"{target} is not present")
    cfg = tmp_path / "empty.toml"
    cfg.write_text("", encoding="utf-8")
    audit = _audit_layouts([str(target)], cfg, tmp_path)
    assert audit  # every set here has readable shards
    assert _inspect_layouts([str(target)], cfg) == audit


@pytest.mark.realdata
def test_inspect_shows_the_audits_layout_on_emotion_csv(tmp_path):
    data = tmp_path / "emotion"
    data.mkdir()
    shutil.copy(REALDATA / "emotion" / "val.txt", data / "val.csv")
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text('[dataset]\nseparator = ";"\n[columns]\ntext = ["text"]\nlabel = "label_name"\n', encoding="utf-8")
    audit = _audit_layouts([str(data)], cfg, tmp_path)
    assert audit["val.csv"]["name"] == "text_classification"
    assert _inspect_layouts([str(data)], cfg) == audit


def _corpus_params():
    mod = _corpus()
    return [pytest.param(k, marks=pytest.mark.slow) if k in mod.SLOW else k for k in mod.CORPUS]


@pytest.mark.realdata
@pytest.mark.parametrize("layout", _corpus_params())
def test_inspect_shows_the_audits_layout_on_the_layout_corpus(layout, tmp_path):
    folder = _corpus().CORPUS[layout](tmp_path / layout)
    cfg = folder / "datacheck.toml"
    audit = _audit_layouts([str(folder)], cfg, tmp_path)
    assert {v["name"] for v in audit.values()} == {layout}
    got = _inspect_layouts([str(folder)], cfg)
    assert got == audit
    text = run_cli("inspect", str(folder), "--config", str(cfg)).stdout
    (shard, lay), = audit.items()
    assert f"  layout: {lay['name']} ({lay['source']}: {lay['why']})" in text.splitlines()


def _t5_rows(folder: Path, toml: str, width: int | None = None) -> tuple[Path, list[list[int]]]:
    """AG News prompts as T5-style rows (GPT-2 BPE): encoder ids and decoder labels with eos; with
    ``width``, both cut/padded to ``width`` (labels -100, ids eos on the padding), as a tokenizer called
    with one ``max_length`` for inputs and targets pads them."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    raw = pl.read_ndjson(REALDATA / "agnews_prompts_jsonl" / "ag_news_classify_question_first.jsonl").head(20)
    ids = [tok.encode(x).ids + [50256] for x in raw["inputs"]]
    labels = [tok.encode(" " + x.strip()).ids + [50256] for x in raw["targets"]]
    if width is not None:
        ids = [(x[:width] + [50256] * width)[:width] for x in ids]
        labels = [(x[:width] + [-100] * width)[:width] for x in labels]
    folder.mkdir(parents=True)
    pl.DataFrame({"input_ids": ids, "labels": labels}).write_parquet(folder / "train.parquet")
    (folder / "datacheck.toml").write_text("[tokens]\nvocab_size = 50257\neos_token_id = 50256\n" + toml,
                                           encoding="utf-8")
    return folder, labels


def _decode(ids: list[int]) -> str:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.ByteLevelBPETokenizer(str(GPT2 / "vocab.json"), str(GPT2 / "merges.txt"))
    return tok.decode(ids, skip_special_tokens=False)


@pytest.mark.realdata
@pytest.mark.parametrize("stated", [False, True])
def test_seq2seq_rows_have_no_per_token_supervision(stated, tmp_path):
    """T5-style rows: recognized as seq2seq (labels of their own length), or of one width with
    ``[dataset] layout = "seq2seq"`` stated (the recognizer alone cannot tell them from token labels):
    inspect says seq2seq as the audit does and shows the decoder's targets decoded, not the input
    tokens coloured as if ``labels[i]`` belonged to ``input_ids[i]``."""
    folder, labels = _t5_rows(tmp_path / "t5", '[dataset]\nlayout = "seq2seq"\n' if stated else "",
                              width=24 if stated else None)
    cfg = folder / "datacheck.toml"
    audit = _audit_layouts([str(folder)], cfg, tmp_path)
    assert {(v["name"], v["source"]) for v in audit.values()} == {("seq2seq", "config" if stated else "recognized")}
    res = _inspect([str(folder)], cfg, "--rows", "0,3", "--tokenizer", str(GPT2))
    (shard,) = res["shards"]
    assert [r["row"] for r in shard["shown"]] == [0, 3]
    for r in shard["shown"]:
        targets = [t for t in labels[r["row"]] if t != -100]
        assert r["supervision"] is None and r["supervision_runs"] is None
        assert r["supervision_note"].startswith(f"seq2seq: 'labels' holds the decoder's targets ({len(targets)} "
                                                f"supervised of {len(labels[r['row']])})")
        assert r["decoded"] == _decode(targets)
    assert {shard["path"]: shard["layout"]} == audit


@pytest.mark.realdata
def test_a_stated_layout_wins_in_inspect_as_in_the_audit(tmp_path):
    """The same T5-style rows with ``[dataset] layout = "causal_lm"`` stated: the audit judges them as
    causal LM rows (labels aligned with the ids, so ``length.mismatch``), and inspect shows the
    stated layout and the rows the audit failed, not its own guess from the columns."""
    folder, labels = _t5_rows(tmp_path / "t5", '[dataset]\nlayout = "causal_lm"\n')
    cfg = folder / "datacheck.toml"
    audit = _audit_layouts([str(folder)], cfg, tmp_path)
    assert [(v["name"], v["source"]) for v in audit.values()] == [("causal_lm", "config")]
    res = _inspect([str(folder)], cfg)
    (shard,) = res["shards"]
    assert shard["layout"] == next(iter(audit.values()))
    raw = pl.read_parquet(folder / "train.parquet")
    differ = [i for i, (a, b) in enumerate(zip(raw["input_ids"].to_list(), labels)) if len(a) != len(b)]
    assert shard["failing"]["length.mismatch"]["rows"] == differ
