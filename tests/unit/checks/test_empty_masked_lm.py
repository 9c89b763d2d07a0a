"""Pre-masked masked-LM rows (``DataCollatorForLanguageModeling(mlm=True)`` output saved as data): the
``masked_lm`` layout. A row the 15% masking gave no masked position is no defect (the loss is a mean
over the batch's supervised positions); a shard with no masked position at all is
(``empty.no_supervised_tokens`` on every row); the defects of ids, labels and masks are still found."""
from __future__ import annotations

import json
import random

import polars as pl
import pytest
from batchhelp import batch_rows
from checkhelp import audit_df, findings, one
from conftest import REALDATA, ROOT, write_frame

from datacheck.model.layouts import LAYOUT_NAMES
from datacheck.tools.infer import propose_layout

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

TOKENIZER = REALDATA / "minilm_bert_tokenizer"
IGN = -100
WORDS = ("the cat sat on a mat while dogs ran through green fields under blue skies and birds sang "
         "over quiet hills near old stone walls").split()


@pytest.fixture(scope="module")
def tok():
    if not TOKENIZER.is_dir():
        pytest.skip("../shared/realdata/minilm_bert_tokenizer is not present")
    return transformers.BertTokenizerFast.from_pretrained(str(TOKENIZER))


def collated(tok, rows: int = 300, seed: int = 0, longest: int = 24) -> pl.DataFrame:
    """``rows`` short sentences tokenized and masked by the real collator (seeded), batch by batch of
    32, saved as the lists the collator returns (right-padded per batch)."""
    rng = random.Random(seed)
    texts: dict[str, None] = {}  # distinct sentences: a repeated one would be dup.exact_in_shard's
    while len(texts) < rows:
        texts[" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest)))] = None
    enc = [tok(t, truncation=True, max_length=64) for t in texts]
    torch.manual_seed(seed)
    col = transformers.DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
    out: dict[str, list] = {"input_ids": [], "attention_mask": [], "labels": []}
    for i in range(0, len(enc), 32):
        b = col([{"input_ids": e["input_ids"], "attention_mask": e["attention_mask"]} for e in enc[i:i + 32]])
        for k in out:
            out[k].extend(b[k].tolist())
    return pl.DataFrame(out)


def facts(tok) -> dict:
    return {"tokens": {"vocab_size": len(tok), "pad_token_id": tok.pad_token_id, "max_seq_len": 64}}


def layout_of(rep) -> dict:
    (shard,) = rep.shards
    return {"name": shard.layout, "why": shard.layout_why}


def unsupervised_rows(df: pl.DataFrame) -> list[int]:
    return [i for i, lab in enumerate(df["labels"].to_list()) if all(v == IGN for v in lab)]


def test_clean_collator_output_is_masked_lm_with_no_finding(tmp_path, tok):
    df = collated(tok)
    none = unsupervised_rows(df)
    assert len(none) > 10  # the case: 15% masking of short rows leaves rows with no masked position
    rep = audit_df(tmp_path, df, facts(tok))
    layout = layout_of(rep)
    assert layout["name"] == "masked_lm"
    assert f"id {tok.mask_token_id} in 'input_ids' (the mask token)" in layout["why"]
    assert rep.findings == [], [(f.check, f.count) for f in rep.findings]


def test_clean_collator_output_without_facts_has_no_finding(tmp_path, tok):
    """Repeated words made labels.shift_mismatch read masked positions as shifted labels: it does not apply."""
    rep = audit_df(tmp_path, collated(tok, seed=1))
    assert layout_of(rep)["name"] == "masked_lm"
    assert rep.findings == [], [(f.check, f.count) for f in rep.findings]


@pytest.mark.parametrize("rows_a_batch", [None, 40])
def test_a_shard_with_no_masked_position_fails_every_row(tmp_path, tok, rows_a_batch):
    df = collated(tok, rows=120, seed=2)
    df = df.with_columns(pl.col("labels").list.eval(pl.lit(IGN, dtype=pl.Int64)))
    cfg = {**facts(tok), "dataset": {"layout": "masked_lm"}}
    with batch_rows(rows_a_batch):
        rep = audit_df(tmp_path, df, cfg)
    f = one(rep, "empty.no_supervised_tokens", "labels")
    assert (f.count, f.rows[:3], f.severity) == (df.height, (0, 1, 2), "error")
    assert "no row of the shard has a supervised token" in f.message


@pytest.mark.parametrize("rows_a_batch", [None, 40])
def test_batches_without_a_masked_position_are_no_defect(tmp_path, tok, rows_a_batch):
    """The rows of the first batches keep no supervised label, the last rows keep theirs: the shard is
    supervised, so no row fails, whichever batch its rows are read in."""
    df = collated(tok, rows=120, seed=3)
    keep = df.height - 10
    df = df.with_columns(pl.when(pl.int_range(pl.len()) < keep)
                         .then(pl.col("labels").list.eval(pl.lit(IGN, dtype=pl.Int64)))
                         .otherwise(pl.col("labels")).alias("labels"))
    assert len(unsupervised_rows(df)) < df.height
    cfg = {**facts(tok), "dataset": {"layout": "masked_lm"}}
    with batch_rows(rows_a_batch):
        rep = audit_df(tmp_path, df, cfg)
    assert findings(rep, "empty.no_supervised_tokens") == []


def test_real_defects_are_still_found(tmp_path, tok):
    df = collated(tok, seed=4)
    ids, labels, mask = (df[c].to_list() for c in ("input_ids", "labels", "attention_mask"))
    vocab = len(tok)
    ids[3][1] = vocab + 7  # an id past the vocabulary
    sup5 = next(j for j, v in enumerate(labels[5]) if v != IGN) if any(v != IGN for v in labels[5]) else 1
    labels[5][sup5] = vocab + 100  # a label past the vocabulary
    mask[7] = [0] * len(mask[7])  # an all-zero attention mask
    pad_at = next(i for i, m in enumerate(mask) if i != 7 and 0 in m)
    labels[pad_at][mask[pad_at].index(0)] = ids[pad_at][0]  # a label at a padded position
    df = pl.DataFrame({"input_ids": ids, "attention_mask": mask, "labels": labels})
    rep = audit_df(tmp_path, df, facts(tok))
    assert layout_of(rep)["name"] == "masked_lm"
    assert one(rep, "tokens.out_of_vocab", "input_ids").rows == (3,)
    assert one(rep, "labels.out_of_range", "labels").rows == (5,)
    assert one(rep, "empty.all_padding", "attention_mask").rows == (7,)
    assert pad_at in one(rep, "padding.label_not_ignored", "labels").rows
    assert findings(rep, "empty.no_supervised_tokens") == []


def test_token_rows_without_a_mask_token_are_not_masked_lm(tmp_path):
    """Labels that equal the ids stay causal LM rows; NER tags stay token classification."""
    lm = {"input_ids": [[5, 6, 7, 0], [5, 6, 7, 8]], "attention_mask": [[1, 1, 1, 0], [1] * 4],
          "labels": [[5, 6, 7, IGN], [5, 6, 7, 8]]}
    assert layout_of(audit_df(tmp_path, lm))["name"] == "causal_lm"
    ner = {"input_ids": [[101, 2054 + i, 2003, 102] for i in range(20)],
           "labels": [[IGN, i % 3, 0, IGN] for i in range(20)]}
    assert layout_of(audit_df(tmp_path, ner, name="ner.parquet"))["name"] == "token_classification"


def test_schema_infer_proposes_no_sft_contract_for_masked_lm_rows(tmp_path, tok):
    """The rows ignore attended tokens before their first masked one: ``schema infer`` once proposed the
    ``sft_tokenized`` contract (a prompt hidden from the loss); it now says the audit reads them as
    ``masked_lm`` and proposes no built-in contract."""
    path = write_frame(tmp_path / "mlm.parquet", collated(tok, seed=5))
    p = propose_layout([str(path)])
    assert p.layout is None and p.rows is not None and p.rows.name == "masked_lm"
    assert any("masked_lm" in note for note in p.notes)


def test_report_schema_names_every_layout():
    """A report of a masked_lm shard validates: the report contract's layout enum names every layout."""
    schema = json.loads((ROOT / "schemas" / "report.schema.json").read_text())
    enum = _find_layout_enum(schema)
    assert set(LAYOUT_NAMES) | {None} == set(enum)


def _find_layout_enum(node):
    if isinstance(node, dict):
        if "layout" in node and isinstance(node["layout"], dict) and "enum" in node["layout"]:
            return node["layout"]["enum"]
        for v in node.values():
            got = _find_layout_enum(v)
            if got is not None:
                return got
    elif isinstance(node, list):
        for v in node:
            got = _find_layout_enum(v)
            if got is not None:
                return got
    return None


def test_grouped_collator_rows_are_masked_lm(tmp_path, tok):
    """run_mlm without --line_by_line: the texts tokenized, concatenated and cut into rows of one
    length (group_texts, no padding, no attention mask kept), then masked by the collator."""
    rng = random.Random(6)
    ids = [i for _ in range(200) for i in tok(" ".join(rng.choice(WORDS) for _ in range(12)))["input_ids"]]
    block = 32
    rows = [ids[i:i + block] for i in range(0, len(ids) - block + 1, block)]
    torch.manual_seed(6)
    col = transformers.DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=0.15, return_tensors="pt")
    b = col([{"input_ids": r} for r in rows])
    df = pl.DataFrame({"input_ids": b["input_ids"].tolist(), "labels": b["labels"].tolist()})
    masked = sum(1 for r in df["input_ids"].to_list() for v in r if v == tok.mask_token_id)
    assert masked > 0 and len(set(len(r) for r in rows)) == 1
    rep = audit_df(tmp_path, df, facts(tok))
    assert layout_of(rep)["name"] == "masked_lm"
    assert rep.findings == [], [(f.check, f.count) for f in rep.findings]
