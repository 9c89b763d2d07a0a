"""``datacheck inspect --tokenizer``: each token classified by supervision, checked
against a plain-Python reference for both label conventions, left and right padding, assistant masks
and rows without a mask; the plain, ANSI and HTML renderings; the CLI (--color, --html) on a real
chat tokenizer (SmolLM-135M) and GPT-2."""
from __future__ import annotations

import polars as pl
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from datacheck.model.config import config_from_dict
from datacheck.model.supervision import classify_supervision
from datacheck.render.supervision import render_ansi, render_html_tokens, render_plain, runs, supervision_counts
from datacheck.tools.inspect import inspect_shards, load_tokenizer

SHARED = ROOT.parent / "shared"
SMOLLM = SHARED / "chat" / "tokenizers" / "smollm_135m"
GPT2 = SHARED / "realdata" / "gpt2_tokenizer"
from conftest import examples, run_cli  # noqa

S, I, P, X = "supervised", "ignored", "padding", "padding_supervised"  # noqa: E741


def reference(ids, mask=None, labels=None, amask=None, ignore=-100, shifted=False, pad_id=None, side="right"):
    """Plain-Python reference, written from the rule as sets of positions (not per token)."""
    n = len(ids)
    if mask is not None:
        padding = {j for j in range(n) if j < len(mask) and mask[j] == 0}
    elif pad_id is None:
        padding = set()
    else:
        k = 0
        seq = ids[::-1] if side == "right" else ids
        while k < n and seq[k] == pad_id:
            k += 1
        padding = set(range(n - k, n)) if side == "right" else set(range(k))
    if labels is not None:
        sup = {j for j in range(len(labels)) if labels[j] is not None and labels[j] != ignore}
        targets = {j + 1 for j in sup} if shifted else sup
    elif amask is not None:
        targets = {j for j in range(min(n, len(amask))) if amask[j] == 1}
    else:
        targets = set(range(n)) - padding
    targets = {j for j in targets if 1 <= j < n}  # the first token is never predicted
    return [(X if j in targets else P) if j in padding else (S if j in targets else I) for j in range(n)]


# 5 prompt tokens, 3 response tokens ending in eot 2, then padding 0
IDS = [1, 10, 11, 12, 13, 20, 21, 2, 0, 0]
MASK = [1] * 8 + [0, 0]
UNSHIFTED = [-100] * 5 + [20, 21, 2, -100, -100]           # labels[i] = ids[i] on the response (HF)
SHIFTED = [-100] * 4 + [20, 21, 2, -100, -100, -100]        # labels[i] = ids[i+1] (nanoGPT, Megatron)
WANT = [I] * 5 + [S, S, S, P, P]


@pytest.mark.parametrize("labels,shifted", [(UNSHIFTED, False), (SHIFTED, True)])
def test_both_conventions_right_padding(labels, shifted):
    assert classify_supervision(IDS, attention_mask=MASK, labels=labels, shifted=shifted) == WANT


@pytest.mark.parametrize("labels,shifted", [(UNSHIFTED, False), (SHIFTED, True)])
def test_both_conventions_left_padding(labels, shifted):
    ids, mask = [0, 0] + IDS[:8], [0, 0] + [1] * 8
    lab = [-100, -100] + labels[:8]
    assert classify_supervision(ids, attention_mask=mask, labels=lab, shifted=shifted) == [P, P] + WANT[:8]


def test_supervised_padding_and_first_token():
    lab = UNSHIFTED[:8] + [0, -100]
    assert classify_supervision(IDS, attention_mask=MASK, labels=lab) == [I] * 5 + [S, S, S, X, P]
    # labels[0] is never used by a shifted loss: token 0 is not a target even when labels[0] is set
    assert classify_supervision([5, 6], labels=[5, 6]) == [I, S]


def test_assistant_mask_without_labels():
    am = [0] * 5 + [1, 1, 1, 0, 0]
    assert classify_supervision(IDS, attention_mask=MASK, assistant_mask=am) == WANT


def test_no_mask_uses_pad_id_on_the_padded_side():
    assert classify_supervision(IDS, pad_token_id=0) == [I] + [S] * 7 + [P, P]
    left = [0, 0, 5, 0, 6]
    assert classify_supervision(left, pad_token_id=0, padding_side="left") == [P, P, S, S, S]
    assert classify_supervision(IDS) == [I] + [S] * 9  # no mask, no pad id: nothing is padding


def test_other_ignore_index():
    assert classify_supervision([1, 2, 3], labels=[-1, -1, 3], ignore_index=-1) == [I, I, S]
    assert classify_supervision([1, 2, 3], labels=[-100, -100, 3], ignore_index=None) == [I, S, S]


_ids = st.lists(st.integers(0, 5), min_size=1, max_size=24)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_property_matches_reference(data):
    ids = data.draw(_ids)
    n = len(ids)
    pick = data.draw(st.sampled_from(["labels", "amask", "none"]))
    side = data.draw(st.sampled_from(["right", "left"]))
    with_mask = data.draw(st.booleans())
    if with_mask:
        k = data.draw(st.integers(0, n))
        mask = [1] * (n - k) + [0] * k if side == "right" else [0] * k + [1] * (n - k)
    else:
        mask = None
    labels = data.draw(st.lists(st.sampled_from([-100, 0, 3, None]), min_size=n, max_size=n)) if pick == "labels" else None
    amask = data.draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n)) if pick == "amask" else None
    shifted = data.draw(st.booleans())
    pad_id = data.draw(st.sampled_from([None, 0]))
    got = classify_supervision(ids, attention_mask=mask, labels=labels, assistant_mask=amask, shifted=shifted,
                               pad_token_id=pad_id, padding_side=side)
    assert got == reference(ids, mask, labels, amask, shifted=shifted, pad_id=pad_id, side=side)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.booleans()), min_size=2, max_size=30))
def test_property_conventions_agree(tokens):
    """The same supervision stored both ways (HF unshifted, and shifted one to the left) classifies
    every token the same."""
    ids = [t for t, _ in tokens]
    unshifted = [t if keep else -100 for t, keep in tokens]
    shifted = unshifted[1:] + [-100]
    assert (classify_supervision(ids, labels=unshifted, shifted=False)
            == classify_supervision(ids, labels=shifted, shifted=True))


PAIRS = [("<|im_start|>", I), ("user\n", I), ("4", S), ("<|im_end|>", S), ("<pad>", P), ("<pad>", X), ("<pad>", P),
         ("<pad>", P)]


def test_runs_collapse_padding_and_escape_newlines():
    assert runs(PAIRS) == [(I, ["<|im_start|>", "user\\n"]), (S, ["4", "<|im_end|>"]), (P, ["<pad>"]),
                           (X, ["<pad>"]), (P, ["<pad>×2"])]
    assert supervision_counts(PAIRS) == {S: 2, I: 2, P: 3, X: 1}


def test_plain_rendering():
    assert render_plain(PAIRS, legend=False) == (
        "[I: <|im_start|>user\\n][S: 4<|im_end|>][P: <pad>][X: <pad>][P: <pad>×2]\n"
        "8 tokens: 2 supervised, 2 ignored, 3 padding, 1 padding trained on")
    assert "\x1b[" not in render_plain(PAIRS)
    assert render_plain(PAIRS).splitlines()[-1].startswith("legend: S = supervised")


def test_ansi_rendering():
    out = render_ansi(PAIRS, legend=False)
    first = out.splitlines()[0]
    assert first == ("\x1b[90m<|im_start|>\x1b[0m\x1b[90muser\\n\x1b[0m\x1b[1;32m4\x1b[0m\x1b[1;32m<|im_end|>\x1b[0m"
                     "\x1b[34m<pad>\x1b[0m\x1b[1;37;41m<pad>\x1b[0m\x1b[34m<pad>×2\x1b[0m")
    assert out.splitlines()[1] == "8 tokens: 2 supervised, 2 ignored, 3 padding, 1 padding trained on"


def test_terminal_control_characters_in_tokens_are_escaped():
    """A tokenizer's vocabulary can hold ESC and bidi controls: shown as escapes, never sent live."""
    pairs = [("\x1b[2J", S), ("a\u202eb", I)]
    for out in (render_plain(pairs, legend=False), render_ansi(pairs, legend=False)):
        assert "\x1b[2J" not in out and "\u202e" not in out
        assert "\\x1b[2J" in out and "a\\u202eb" in out


def test_html_tokens_escape_markup():
    got = render_html_tokens([("<script>", S), ("&", I)])
    assert got == ('<div class="toks"><span class="tok sup" title="supervised">&lt;script&gt;</span>'
                   '<span class="tok ign" title="ignored">&amp;</span></div>')


# ----------------------------------------------------------------------------------------- real tokenizers
def _chatml_shard(tmp_path):
    """Two ChatML rows tokenized with the real SmolLM-135M tokenizer: row 0 right-padded with
    <|im_end|> (id 2) and its padding ignored; row 1 the same with one padding label supervised."""
    tokenizers = pytest.importorskip("tokenizers")
    if not SMOLLM.is_dir():
        pytest.skip("../shared/chat is not present")
    tok = tokenizers.Tokenizer.from_file(str(SMOLLM / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    prompt = tok.encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n").ids
    resp = tok.encode("4<|im_end|>\n").ids
    ids = prompt + resp + [2, 2, 2]
    mask = [1] * (len(prompt) + len(resp)) + [0, 0, 0]
    ok = [-100] * len(prompt) + resp + [-100] * 3
    bad = [-100] * len(prompt) + resp + [-100, 2, -100]
    d = tmp_path / "data"
    d.mkdir()
    pl.DataFrame({"input_ids": [ids, ids], "attention_mask": [mask, mask], "labels": [ok, bad]}).write_parquet(
        d / "sft.parquet")
    return d / "sft.parquet", len(prompt), len(resp)


def test_real_smollm_rows(tmp_path):
    shard, np_, nr = _chatml_shard(tmp_path)
    ins = inspect_shards([str(shard)], config_from_dict({"tokens": {"pad_token_id": 2}}), rows=[0, 1],
                         tokenizer=load_tokenizer(SMOLLM))[0]
    first = {}
    for r in ins.shown:  # a row is shown once per check it fails: the same supervision each time
        first.setdefault(r.row, r)
    assert {r.row: r.supervision for r in ins.shown} == {k: v.supervision for k, v in first.items()}
    row0, row1 = first[0], first[1]
    assert [t for t, _ in row0.supervision][: 3] == ["<|im_start|>", "user", "\n"]
    assert [c for _, c in row0.supervision] == [I] * np_ + [S] * nr + [P] * 3
    assert "".join(t for t, c in row0.supervision if c == S) == "4<|im_end|>\n"
    assert [c for _, c in row1.supervision][-3:] == [P, X, P]
    assert row1.to_dict()["supervision"][-2] == {"token": "<|im_end|>", "class": X}


@pytest.mark.slow
def test_cli_plain_when_piped_and_ansi_when_asked(tmp_path):
    shard, np_, nr = _chatml_shard(tmp_path)
    r = run_cli("inspect", str(shard), "--rows", "1", "--tokenizer", str(SMOLLM))
    assert r.returncode == 1, r.stderr  # row 1 fails padding.label_not_ignored
    assert "\x1b[" not in r.stdout  # captured stdout is not a terminal
    assert ("[I: <|im_start|>user\\nWhat is 2+2?<|im_end|>\\n<|im_start|>assistant\\n][S: 4<|im_end|>\\n]"
            "[P: <|im_end|>][X: <|im_end|>][P: <|im_end|>]") in r.stdout
    assert f"{np_ + nr + 3} tokens: {nr} supervised, {np_} ignored, 2 padding, 1 padding trained on" in r.stdout
    assert "supervision: [S: ...] = supervised" in r.stdout
    c = run_cli("inspect", str(shard), "--rows", "1", "--tokenizer", str(SMOLLM), "--color", "always")
    # each run decoded from its joined ids, in its class's colour
    assert "\x1b[1;37;41m<|im_end|>\x1b[0m" in c.stdout and "\x1b[1;32m4<|im_end|>\\n\x1b[0m" in c.stdout
    n = run_cli("inspect", str(shard), "--rows", "1", "--tokenizer", str(SMOLLM), "--color", "never")
    assert "\x1b[" not in n.stdout


def test_cli_html(tmp_path):
    shard, np_, nr = _chatml_shard(tmp_path)
    out = tmp_path / "rows.html"
    r = run_cli("inspect", str(shard), "--rows", "0,1", "--tokenizer", str(SMOLLM), "--html", str(out))
    assert r.returncode == 1, r.stderr
    page = out.read_text(encoding="utf-8")
    assert page.count('class="toks"') == 2
    assert page.count('<span class="tok padsup" title="padding_supervised">&lt;|im_end|&gt;</span>') == 1
    assert '<span class="tok sup" title="supervised">4&lt;|im_end|&gt;\\n</span>' in page  # one span per run
    assert "<script" not in page
    inside = run_cli("inspect", str(shard), "--tokenizer", str(SMOLLM), "--html", str(shard.parent / "x.html"))
    assert inside.returncode == 2 and "does not write among the data" in inside.stderr
    notok = run_cli("inspect", str(shard), "--html", str(out))
    assert notok.returncode == 2 and "--tokenizer" in notok.stderr


def test_gpt2_left_padded_shifted(tmp_path):
    pytest.importorskip("tokenizers")
    if not GPT2.is_dir():
        pytest.skip("../shared/realdata is not present")
    tok = load_tokenizer(GPT2)
    # "Hello world" = 15496 995 (PROVENANCE.md); left padding with eos 50256; shifted labels
    ids = [50256, 50256, 15496, 995, 50256]
    df = pl.DataFrame({"input_ids": [ids], "attention_mask": [[0, 0, 1, 1, 1]], "labels": [[-100, -100, 995, 50256, -100]]})
    (tmp_path / "d").mkdir()
    df.write_parquet(tmp_path / "d" / "s.parquet")
    cfg = config_from_dict({"labels": {"shifted": True}, "tokens": {"padding_side": "left", "pad_token_id": 50256,
                                                                  "eos_token_id": 50256}})
    row = inspect_shards([str(tmp_path / "d" / "s.parquet")], cfg, rows=[0], tokenizer=tok)[0].shown[0]
    assert row.supervision == (("<|endoftext|>", P), ("<|endoftext|>", P), ("Hello", I), (" world", S),
                               ("<|endoftext|>", S))


MINILM = SHARED / "realdata" / "minilm_bert_tokenizer"
OPENWEBTEXT = SHARED / "realdata" / "megatron_gpt2_openwebtext"


def test_byte_level_runs_are_decoded_from_their_joined_ids():
    """“ is split over two GPT-2 tokens (564 = " " + e2 80, 250 = 9c); decoded per
    token it showed as escaped bytes inside the run."""
    pytest.importorskip("tokenizers")
    if not (GPT2.is_dir() and OPENWEBTEXT.is_dir()):
        pytest.skip("../shared/realdata is not present")
    tok = load_tokenizer(GPT2)
    row = inspect_shards([str(OPENWEBTEXT)], config_from_dict({}), rows=[0], tokenizer=tok)[0].shown[0]
    assert [c for c, _ in row.supervision_runs] == [I, S]  # token 0 is never a target; causal LM: the rest
    assert row.supervision_runs[0][1] == "A"
    text = row.supervision_runs[1][1]
    assert text.startswith(" magazine supplement with an image of Adolf Hitler")
    assert "No law bans “Mein Kampf” in Germany" in text and "\\x" not in text
    # a token holding part of a character keeps its decodable bytes readable: " <0xE2><0x80>", not
    # "<0x20><0xE2><0x80>"; “ is e2 80 9c in UTF-8
    want = "".join(f"<0x{b:02X}>" for b in "“".encode()[:2])
    assert tok.tokens([564, 250]) == [" " + want, "<0x9C>"]
    assert tok.decode([564, 250]) == " “" and tok.decode([564]) == " " + want


@pytest.mark.parametrize("source", ["tokenizer.json", "vocab.txt"])
def test_wordpiece_runs_are_decoded_with_the_tokenizers_own_decode(tmp_path, source):
    """WordPiece pieces are decoded by the tokenizer's own decode, with the spaces between words
(never "macdonaldcatalogue")."""
    pytest.importorskip("tokenizers")
    if not MINILM.is_dir():
        pytest.skip("../shared/realdata is not present")
    tok = load_tokenizer(MINILM / source)
    ids = tok.tokenizer.encode("macdonald catalogue unaffable tokenization").ids  # una ##ffa ##ble token ##ization
    labels = [-100, -100, *ids[2:]]
    (tmp_path / "d").mkdir()
    pl.DataFrame({"input_ids": [ids], "labels": [labels]}).write_parquet(tmp_path / "d" / "s.parquet")
    row = inspect_shards([str(tmp_path / "d" / "s.parquet")], config_from_dict({}), rows=[0], tokenizer=tok)[0].shown[0]
    assert row.supervision_runs == ((I, "[CLS] macdonald"), (S, "catalogue unaffable tokenization [SEP]"))
    r = run_cli("inspect", str(tmp_path / "d" / "s.parquet"), "--rows", "0", "--tokenizer", str(MINILM / source))
    assert "[I: [CLS] macdonald][S: catalogue unaffable tokenization [SEP]]" in r.stdout, r.stdout


def test_classification_rows_are_not_coloured_as_causal_lm_targets(tmp_path):
    """A scalar class label and no token labels: the loss is per row, no token is
    a target; the tokens are shown uncoloured with a note."""
    pytest.importorskip("tokenizers")
    if not MINILM.is_dir():
        pytest.skip("../shared/realdata is not present")
    tok = load_tokenizer(MINILM)
    ids = tok.tokenizer.encode("macdonald catalogue").ids + [0, 0, 0]  # [PAD] = 0
    (tmp_path / "d").mkdir()
    pl.DataFrame({"input_ids": [ids], "attention_mask": [[1] * 4 + [0] * 3], "label": [1]}).write_parquet(
        tmp_path / "d" / "s.parquet")
    row = inspect_shards([str(tmp_path / "d" / "s.parquet")], config_from_dict({}), rows=[0], tokenizer=tok)[0].shown[0]
    assert row.supervision is None and row.supervision_runs is None
    assert row.supervision_note == "no token labels: supervision is per row (the class label 'label' = 1); tokens shown uncoloured"
    assert row.decoded == "[CLS] macdonald catalogue [SEP][PAD]×3"
    r = run_cli("inspect", str(tmp_path / "d" / "s.parquet"), "--rows", "0", "--tokenizer", str(MINILM), "--color", "always")
    assert "supervision: no token labels: supervision is per row" in r.stdout and "[CLS] macdonald catalogue" in r.stdout
    assert "\x1b[1;32m" not in r.stdout and "[S:" not in r.stdout  # nothing coloured or marked supervised
