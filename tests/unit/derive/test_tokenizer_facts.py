"""The facts of ``[tokens] tokenizer`` (:func:`datacheck.derive.tokenizer.tokenizer_facts`): the
vocabulary size and the pad/eos/bos ids the tokenizer declares, on the real tokenizers of
../shared (PROVENANCE.md) and on copies of them with edited declaration files. Every expected value
is read here from the tokenizer's own files (JSON, vocab.txt lines), never from datacheck."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import SHARED

from datacheck.derive.tokenizer import tokenizer_facts, with_tokenizer_facts
from datacheck.model.config import Config
from datacheck.model.errors import UsageError

pytest.importorskip("tokenizers")

SMOLLM = SHARED / "chat/tokenizers/smollm_135m"  # 49152 base tokens, [PAD] = 49152 added; eos = bos = <|endoftext|>
MINILM = SHARED / "realdata/minilm_bert_tokenizer"  # BERT WordPiece, 30,522 tokens; pad [PAD], no eos/bos
GPT2 = SHARED / "realdata/gpt2_tokenizer"  # vocab.json + merges.txt only: 50,257 tokens, no declaration file

pytestmark = pytest.mark.skipif(not (SMOLLM.is_dir() and MINILM.is_dir() and GPT2.is_dir()),
                                reason="shared tokenizers not present")


def _smollm_files() -> tuple[dict[str, int], dict[str, int]]:
    """(base vocabulary, added tokens) of SmolLM-135M's tokenizer.json, token -> id."""
    tj = json.loads((SMOLLM / "tokenizer.json").read_text())
    return tj["model"]["vocab"], {t["content"]: t["id"] for t in tj["added_tokens"]}


def _gpt2_copy(dest: Path, declarations: dict[str, object] | None = None) -> Path:
    dest.mkdir(parents=True)
    for f in ("vocab.json", "merges.txt"):
        shutil.copy(GPT2 / f, dest / f)
    for name, doc in (declarations or {}).items():
        (dest / name).write_text(json.dumps(doc))
    return dest


def test_smollm_facts_are_its_files():
    base, added = _smollm_files()
    assert len(base) == 49152 and json.loads((SMOLLM / "added_tokens.json").read_text()) == {"[PAD]": 49152}
    count = max([*base.values(), *added.values()]) + 1  # the ids it can produce: base plus added tokens
    assert count == 49153
    facts = tokenizer_facts(str(SMOLLM), "smollm")
    assert facts.vocab_size == count
    endoftext = base["<|endoftext|>"] if "<|endoftext|>" in base else added["<|endoftext|>"]
    assert endoftext == 0  # PROVENANCE.md: eos = bos = <|endoftext|>
    assert facts.ids == {"pad_token_id": added["[PAD]"], "eos_token_id": endoftext, "bos_token_id": endoftext}


def test_a_file_of_the_folder_names_the_folder():
    """``[tokens] tokenizer`` naming a file reads its folder, as the chat template is read."""
    assert tokenizer_facts(str(SMOLLM / "tokenizer_config.json"), "x") == tokenizer_facts(str(SMOLLM), "x")


MEGATRON = SHARED / "realdata/megatron_gpt2_openwebtext"  # gpt2-tiny-vocab.json + gpt2-tiny-merges.txt (5,000 ids)


def _vocab_bound(vocab_json: Path) -> int:
    """One more than the largest id a GPT-2 style vocab.json maps a token to."""
    return max(json.loads(vocab_json.read_text()).values()) + 1


@pytest.mark.skipif(not MEGATRON.is_dir(), reason="shared Megatron data not present")
@pytest.mark.parametrize("named", ["folder", "file"])
def test_megatron_prefixed_vocab_and_merges_are_the_tokenizer(named):
    """Megatron-LM's ``--vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt`` pair under a prefix
    (the real ``gpt2-tiny-vocab.json`` + ``gpt2-tiny-merges.txt`` beside the .bin/.idx of
    PROVENANCE.md section 4): named as its folder or as the vocab file, it is the tokenizer (it was
    refused: "holds no tokenizer.json, vocab.json + merges.txt or vocab.txt")."""
    vocab = MEGATRON / "gpt2-tiny-vocab.json"
    bound = _vocab_bound(vocab)
    assert bound == 5000  # PROVENANCE.md: gpt2-tiny (5,000), max id 4999 = the EOD token
    path = MEGATRON if named == "folder" else vocab
    assert tokenizer_facts(str(path), "m").vocab_size == bound


def test_a_named_vocab_file_is_read_not_the_folders_first(tmp_path):
    """A folder holding SmolLM's tokenizer.json and GPT-2's vocab.json + merges.txt: naming the
    vocab.json reads GPT-2's vocabulary (as ``inspect --tokenizer FILE`` does), naming the folder
    reads tokenizer.json (the folder rule's first); it read tokenizer.json for both."""
    folder = _gpt2_copy(tmp_path / "both")
    shutil.copy(SMOLLM / "tokenizer.json", folder / "tokenizer.json")
    tj = json.loads((SMOLLM / "tokenizer.json").read_text())
    smollm = max([*tj["model"]["vocab"].values(), *(t["id"] for t in tj["added_tokens"])]) + 1
    gpt2 = _vocab_bound(GPT2 / "vocab.json")
    assert smollm != gpt2
    assert tokenizer_facts(str(folder / "vocab.json"), "v").vocab_size == gpt2
    assert tokenizer_facts(str(folder), "f").vocab_size == smollm


def test_two_prefixed_pairs_in_a_folder_name_no_tokenizer(tmp_path):
    """Two ``PREFIX-vocab.json`` + ``PREFIX-merges.txt`` pairs: the folder does not say which one is
    meant, so it is refused (naming the file chooses)."""
    folder = tmp_path / "two"
    folder.mkdir()
    for prefix in ("a", "b"):
        shutil.copy(GPT2 / "vocab.json", folder / f"{prefix}-vocab.json")
        shutil.copy(GPT2 / "merges.txt", folder / f"{prefix}-merges.txt")
    with pytest.raises(UsageError, match="nor one PREFIX-vocab.json"):
        tokenizer_facts(str(folder), "two")
    assert tokenizer_facts(str(folder / "b-vocab.json"), "b").vocab_size == _vocab_bound(GPT2 / "vocab.json")


def test_bert_declares_a_pad_and_no_eos_or_bos():
    words = (MINILM / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(words) == 30522
    facts = tokenizer_facts(str(MINILM), "minilm")
    assert facts.vocab_size == len(words)
    assert facts.ids == {"pad_token_id": words.index("[PAD]")}  # BERT has [CLS]/[SEP], no bos/eos token


def test_bare_gpt2_vocabulary_declares_nothing(tmp_path):
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    facts = tokenizer_facts(str(_gpt2_copy(tmp_path / "gpt2")), "gpt2")
    assert (facts.vocab_size, facts.ids) == (len(vocab), {})
    assert len(vocab) == 50257


def test_gpt2_like_tokenizer_has_eos_and_bos_and_no_pad(tmp_path):
    """GPT-2 as its tokenizer_config.json declares it: bos = eos = <|endoftext|>, no pad token (none is made up)."""
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    folder = _gpt2_copy(tmp_path / "gpt2", {"tokenizer_config.json": {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
        "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"}})
    facts = tokenizer_facts(str(folder), "gpt2")
    assert facts.ids == {"eos_token_id": vocab["<|endoftext|>"], "bos_token_id": vocab["<|endoftext|>"]}
    assert vocab["<|endoftext|>"] == 50256


@pytest.mark.parametrize(("config", "special_map", "expected"), [
    # transformers' legacy path: no added_tokens_decoder, so special_tokens_map.json wins
    ({"eos_token": "<|endoftext|>"}, {"eos_token": {"content": "!"}, "pad_token": "\""}, {"eos": "!", "pad": "\""}),
    # with added_tokens_decoder the map is not read
    ({"eos_token": "<|endoftext|>", "added_tokens_decoder": {}}, {"eos_token": "!", "pad_token": "\""},
     {"eos": "<|endoftext|>"}),
    # an explicit null: no such token
    ({"pad_token": None, "bos_token": {"content": "<|endoftext|>"}}, None, {"bos": "<|endoftext|>"}),
    # a token the vocabulary does not hold is no id
    ({"pad_token": "<pad-not-in-vocab>"}, None, {}),
])
def test_declarations_follow_transformers_rule(tmp_path, config, special_map, expected):
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    docs = {"tokenizer_config.json": config, **({"special_tokens_map.json": special_map} if special_map else {})}
    facts = tokenizer_facts(str(_gpt2_copy(tmp_path / "t", docs)), "t")
    assert facts.ids == {f"{k}_token_id": vocab[v] for k, v in expected.items()}


def test_an_unreadable_declaration_file_is_a_usage_error(tmp_path):
    folder = _gpt2_copy(tmp_path / "t")
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(UsageError) as err:
        tokenizer_facts(str(folder), "t")
    assert str(err.value).startswith(f"[tokens] tokenizer = 't': cannot read {folder / 'tokenizer_config.json'}: ")
    assert str(err.value).endswith("fix or remove the file (it says which tokens are pad, eos and bos)")


@pytest.mark.parametrize("broken", ["missing", "no_tokenizer_file", "bad_json"])
def test_a_tokenizer_that_does_not_load_names_the_path_and_what_to_do(tmp_path, broken):
    folder = tmp_path / "tok"
    if broken != "missing":
        folder.mkdir()
        (folder / "tokenizer_config.json").write_text('{"eos_token": "</s>"}')
    if broken == "bad_json":
        (folder / "tokenizer.json").write_text('{"version": "1.0", "model": 5}')
    with pytest.raises(UsageError) as err:
        tokenizer_facts(str(folder), "tok")
    msg = str(err.value)
    assert msg.startswith("[tokens] tokenizer = 'tok': ")
    want = {"missing": "no such file or folder; give tokenizer.json",
            "no_tokenizer_file": f"{folder} holds no tokenizer.json, vocab.json + merges.txt (nor one "
                                 "PREFIX-vocab.json + PREFIX-merges.txt) or vocab.txt",
            "bad_json": "cannot load tokenizer.json as a tokenizer: "}[broken]
    assert want in msg, msg


def test_a_sentencepiece_only_folder_gives_no_fact_and_no_error(tmp_path):
    """A slow tokenizer's folder (Llama's ``tokenizer.model`` and its ``tokenizer_config.json``, no
    tokenizer.json): transformers reads it for the chat template, the ``tokenizers`` package reads no
    vocabulary from it, so no ``[tokens]`` key is filled and nothing fails."""
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(b"\x0a\x0b<unk>")
    (folder / "tokenizer_config.json").write_text('{"eos_token": "</s>", "bos_token": "<s>"}')
    facts = tokenizer_facts(str(folder), "llama")
    assert (facts.vocab_size, facts.ids, Path(facts.source).name) == (None, {}, "tokenizer.model")
    cfg = Config.model_validate({"tokens": {"tokenizer": str(folder)}})
    out = with_tokenizer_facts(cfg)
    assert out.tokens.vocab_size is None and out.tokens.eos_token_id is None


# ------------------------------------------------------------------- GPT-2 as on the Hub: eos in its model files
#: openai-community/gpt2's files beside its tokenizer, as the Hub has them (the keys that matter here):
#: tokenizer_config.json names no token; config.json and generation_config.json state the eos id
HUB_GPT2 = {
    "tokenizer_config.json": {"model_max_length": 1024},
    "config.json": {"architectures": ["GPT2LMHeadModel"], "bos_token_id": 50256, "eos_token_id": 50256,
                    "model_type": "gpt2", "n_ctx": 1024, "vocab_size": 50257},
    "generation_config.json": {"_from_model_config": True, "bos_token_id": 50256, "eos_token_id": 50256,
                               "transformers_version": "4.26.0.dev0"},
}


def _hub_gpt2(dest: Path, **docs: object) -> Path:
    """A GPT-2 folder as on the Hub: vocab.json + merges.txt, a tokenizer.json built from them with
    ``<|endoftext|>`` as its one added special token, and :data:`HUB_GPT2` with ``docs`` replacing
    files (a value None removes the file)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    files = {**HUB_GPT2, **{k.replace("__", "."): v for k, v in docs.items()}}
    folder = _gpt2_copy(dest, {k: v for k, v in files.items() if v is not None})
    tok = Tokenizer(models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _transformers_eos(folder: Path) -> int | list[int] | None:
    """Reference: the eos id transformers' generate stops at for a model loaded from ``folder``, as
    ``PreTrainedModel.from_pretrained`` loads its generation config (generation/utils.py: the file,
    else config.json)."""
    from transformers import GenerationConfig

    try:
        return GenerationConfig.from_pretrained(str(folder)).eos_token_id
    except OSError:
        return GenerationConfig.from_pretrained(str(folder), config_file_name="config.json",
                                                _from_model_config=True).eos_token_id


def test_hub_gpt2_folder_gives_the_eos_its_model_files_state(tmp_path):
    pytest.importorskip("transformers")
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    folder = _hub_gpt2(tmp_path / "gpt2")
    added = json.loads((folder / "tokenizer.json").read_text())["added_tokens"]
    assert [(t["content"], t["id"], t["special"]) for t in added] == [("<|endoftext|>", vocab["<|endoftext|>"], True)]
    facts = tokenizer_facts(str(folder), "gpt2")
    assert facts.vocab_size == len(vocab) == 50257
    # PROVENANCE.md: EOS id 50256; the eos alone (bos from a model file and a pad are not taken)
    assert facts.ids == {"eos_token_id": _transformers_eos(folder)} == {"eos_token_id": 50256}
    assert with_tokenizer_facts(Config.model_validate({"tokens": {"tokenizer": str(folder)}})).tokens.eos_token_id \
        == vocab["<|endoftext|>"]


@pytest.mark.parametrize(("docs", "expected"), [
    # no generation_config.json: config.json decides (from the model config, as transformers falls back)
    ({"generation_config__json": None}, "<|endoftext|>"),
    # generation_config.json is there: it decides, config.json is not read
    ({"generation_config__json": {"eos_token_id": 13}}, 13),
    ({"generation_config__json": {"bos_token_id": 50256}}, None),
    # a list of one id is that id; a list of several is no single eos (none picked)
    ({"generation_config__json": {"eos_token_id": [50256]}}, "<|endoftext|>"),
    ({"generation_config__json": {"eos_token_id": [13, 50256]}}, None),
    # a config whose text model holds it (multimodal configs: text_config), read as from_model_config does
    ({"generation_config__json": None, "config__json": {"text_config": {"eos_token_id": 50256}}}, "<|endoftext|>"),
    # an id outside the vocabulary is no id
    ({"generation_config__json": {"eos_token_id": 60000}}, None),
])
def test_model_file_eos_follows_transformers_order(tmp_path, docs, expected):
    pytest.importorskip("transformers")
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    folder = _hub_gpt2(tmp_path / "t", **docs)
    ref = _transformers_eos(folder)
    facts = tokenizer_facts(str(folder), "t")
    want = vocab[expected] if isinstance(expected, str) else expected
    assert facts.ids.get("eos_token_id") == want
    if want is not None:  # transformers stops at the same id
        assert ref in (want, [want])


@pytest.mark.parametrize(("tokenizer_config", "expected"), [
    ({"eos_token": "!"}, "!"),  # the tokenizer's own declaration wins over the model files
    ({"eos_token": None}, None),  # an explicit null: the tokenizer says it has none
])
def test_a_declared_eos_is_not_replaced_by_the_model_files(tmp_path, tokenizer_config, expected):
    vocab = json.loads((GPT2 / "vocab.json").read_text())
    facts = tokenizer_facts(str(_hub_gpt2(tmp_path / "t", tokenizer_config__json=tokenizer_config)), "t")
    assert facts.ids.get("eos_token_id") == (vocab[expected] if expected else None)


@pytest.mark.parametrize("text", ["[1, 2]", "{not json"])
def test_a_model_file_that_is_no_json_object_gives_no_eos_and_no_error(tmp_path, text):
    """Model files are read for the eos alone: a broken one leaves it unset (the checks that need it
    say so) and never fails the audit, unlike a broken tokenizer declaration file."""
    folder = _hub_gpt2(tmp_path / "t", generation_config__json=None)
    (folder / "config.json").write_text(text)
    facts = tokenizer_facts(str(folder), "t")
    assert "eos_token_id" not in facts.ids
    assert facts.vocab_size == len(json.loads((GPT2 / "vocab.json").read_text()))


def test_a_declaration_rewritten_with_its_old_size_and_time_is_read_again(tmp_path):
    """Within one process the facts are read once per state of the folder's files: a rewrite that
    keeps the file's size and puts its modification time back (the API auditing in a loop while the
    tokenizer is edited) must still be read again, or the audit's config, and the result cache's key,
    would carry the old ids."""
    tok = tmp_path / "tok"
    shutil.copytree(SMOLLM, tok)
    base, _ = _smollm_files()
    assert tokenizer_facts(str(tok), "tok").ids["bos_token_id"] == base["<|endoftext|>"]
    cfg = tok / "tokenizer_config.json"
    text = cfg.read_text()
    old, new = '"bos_token": "<|endoftext|>",', '"bos_token": "<|im_end|>",'
    assert text.count(old) == 1
    edited = text.replace(old, new + " " * (len(old) - len(new)))  # blanks outside the string: the same size
    assert len(edited) == len(text)
    st = cfg.stat()
    cfg.write_text(edited)
    os.utime(cfg, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert tokenizer_facts(str(tok), "tok").ids["bos_token_id"] == base["<|im_end|>"]


def test_a_missing_relative_tokenizer_names_where_it_was_looked_for(tmp_path):
    # a config in another folder than the current one: its relative path is read from the config's
    # folder, which the message says (the user looked in the current folder and found the tokenizer)
    from conftest import run_cli
    (tmp_path / "tok").mkdir()
    shutil.copy(SHARED / "chat/tokenizers/smollm_135m/tokenizer.json", tmp_path / "tok" / "tokenizer.json")
    cfgdir = tmp_path / "configs"
    cfgdir.mkdir()
    (cfgdir / "datacheck.toml").write_text('[tokens]\ntokenizer = "tok"\n')
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"input_ids": [1, 2, 3]}\n')
    p = run_cli("audit", str(data), "--config", str(cfgdir / "datacheck.toml"), "--report-dir", str(tmp_path / "r"),
                cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "[tokens] tokenizer = 'tok': no such file or folder" in p.stderr
    assert f"looked for {cfgdir / 'tok'}" in p.stderr and "relative to the config file's folder" in p.stderr, p.stderr
    # an absolute path is named as written, once
    with pytest.raises(UsageError) as err:
        tokenizer_facts(str(tmp_path / "nope"), str(tmp_path / "nope"))
    assert "looked for" not in str(err.value)
