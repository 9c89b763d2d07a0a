"""A tokenizer read through the ``tokenizers`` package (the optional ``tokenizers`` extra), and the
facts an audit takes from it.

:func:`load_tokenizer` is the one loader of a tokenizer's vocabulary: ``inspect --tokenizer`` shows
ids as tokens with it, ``schema infer --tokenizer`` bounds id columns with it, and
:func:`tokenizer_facts` reads the facts of ``[tokens] tokenizer`` with it (its vocabulary size and
the ids of its pad, eos and bos tokens). A folder is read by :func:`datacheck.derive.tokfiles.tokenizer_file`'s
rule (``tokenizer.json``, else ``vocab.json`` + ``merges.txt``, else ``vocab.txt``). Chat templates
are rendered by transformers (:func:`datacheck.derive.chat.load_chat_tokenizer`), not here.
"""
from __future__ import annotations

import codecs
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datacheck.derive.tokfiles import refuse_special_files, tokenizer_file
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.model.config import Config
from datacheck.model.errors import OptionalDependencyError, UsageError

__all__ = ["TOKENIZERS_INSTALL", "TokenizerView", "load_tokenizer", "TokenizerFacts", "tokenizer_facts",
           "SPECIAL_ROLES", "DECLARATION_FILES", "with_tokenizer_facts", "blank_token_ids",
           "BlankPieces", "blank_token_pieces", "WHITE_SPACE"]

#: The install command shown when the optional ``tokenizers`` package is missing: the ``tokenizers``
#: extra's own dependency (pyproject.toml), not a datacheck package from PyPI (the PyPI name
#: ``datacheck`` belongs to another project).
TOKENIZERS_INSTALL = ('pip install "tokenizers>=0.15" (or, in the datacheck source folder, '
                      'pip install -e ".[tokenizers]")')

# --------------------------------------------------------------------------------------------- tokenizer
@dataclass
class TokenizerView:
    """A loaded tokenizer and where it came from.

    Attributes:
        tokenizer: a ``tokenizers.Tokenizer`` (or one of its implementation classes).
        source: the file(s) it was loaded from, for messages.
        vocab_size: one more than the tokenizer's largest id, added tokens included
            (:func:`_id_bound`): ids in ``[0, vocab_size)`` are the rows an embedding for it needs.
        byte_level: the tokenizer's decoder is byte-level (GPT-2 style BPE): its tokens are
            shown decoded (``"Ġworld"`` as ``" world"``), see :meth:`readable`.
    """

    tokenizer: Any
    source: str
    vocab_size: int
    byte_level: bool = False

    def readable(self, token: str) -> str:
        """``token`` as text: byte-level BPE tokens through the tokenizer's own decoder, one token at
        a time (``"Ġworld"`` -> ``" world"``); a token that holds only part of a UTF-8 character
        (the decoder gives U+FFFD) as its bytes, e.g. ``"<0xE2><0x80>"`` (:data:`PARTIAL_BYTES`).
        Other tokens (WordPiece ``"##ing"``, special tokens) are returned as they are."""
        if not self.byte_level:
            return token
        try:
            text = self.tokenizer.decoder.decode([token])
        except Exception:  # a decoder that rejects a lone token: show the token itself
            return token
        if "\ufffd" in text and "\ufffd" not in token:
            raw = bytes(_GPT2_BYTE_OF.get(ch, 0x3F) for ch in token)
            return raw.decode("utf-8", errors=PARTIAL_BYTES)  # " <0xE2><0x80>": the space stays a space
        return text

    def decode(self, ids: list[int | None]) -> str:
        """``ids`` (a run of one row's token ids) as the text they stand for, decoded together as
        the tokenizer decodes them: byte-level BPE tokens joined into their bytes and decoded as
        UTF-8 (a character split over several tokens comes out whole: ``bans “Mein``; bytes of a
        character cut at the run's edge as ``<0xE2><0x80>``); other tokenizers through their own
        ``decode`` (WordPiece ``##`` pieces joined into words, words separated by spaces; special
        tokens kept). An id outside the vocabulary is ``<oov:ID>``, null ``<null>``."""
        parts: list[str] = []
        seg: list[int] = []

        def flush() -> None:
            if seg:
                parts.append(self._decode_ids(seg))
                seg.clear()
        for i in ids:
            if i is None or not 0 <= int(i) < self.vocab_size:
                flush()
                parts.append("<null>" if i is None else f"<oov:{i}>")
            else:
                seg.append(int(i))
        flush()
        return "".join(parts)

    def _decode_ids(self, ids: list[int]) -> str:
        if not self.byte_level:
            return str(self.tokenizer.decode(ids, skip_special_tokens=False))
        out: list[str] = []
        buf = bytearray()
        for i in ids:
            tok = self.tokenizer.id_to_token(i) or ""
            if all(ch in _GPT2_BYTE_OF for ch in tok):
                buf += bytes(_GPT2_BYTE_OF[ch] for ch in tok)
                continue
            if buf:  # a token outside the byte alphabet (an added token): its text as it is
                out.append(buf.decode("utf-8", errors=PARTIAL_BYTES))
                buf = bytearray()
            out.append(tok)
        if buf:
            out.append(buf.decode("utf-8", errors=PARTIAL_BYTES))
        return "".join(out)

    def tokens(self, ids: list[int | None]) -> list[str]:
        """Each id as its token text (:meth:`readable`); an id outside the vocabulary as
        ``<oov:ID>``, null as ``<null>``."""
        out = []
        for i in ids:
            if i is None:
                out.append("<null>")
                continue
            tok = self.tokenizer.id_to_token(int(i)) if 0 <= int(i) < self.vocab_size else None
            out.append(self.readable(tok) if tok is not None else f"<oov:{i}>")
        return out

    def encode(self, text: str) -> list[str]:
        """``text`` split into tokens (no padding or truncation), each as :meth:`readable` text."""
        return [self.readable(tok) for tok in self.tokenizer.encode(text).tokens]


def _gpt2_byte_of() -> dict[str, int]:
    """Character -> byte of GPT-2's byte-level alphabet (``bytes_to_unicode`` in openai/gpt-2
    ``src/encoder.py``, which the ``tokenizers`` ByteLevel pre-tokenizer uses): printable Latin-1
    bytes map to themselves, the other 68 bytes to U+0100 onwards, in byte order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {chr(b): b for b in keep}
    extra = 0
    for b in range(256):
        if b not in out.values():
            out[chr(256 + extra)] = b
            extra += 1
    return out


_GPT2_BYTE_OF = _gpt2_byte_of()

#: the codec error handler that writes each byte of an incomplete UTF-8 character as ``<0xE2>``,
#: the notation of SentencePiece's byte-fallback tokens (Llama's ``<0xE2>``): no backslash, so
#: the renderers, which double a token's backslashes to tell a literal ``\n`` from a newline,
#: never show it as the four characters ``\xe2``
PARTIAL_BYTES = "datacheck.partial-bytes"


def _partial_bytes(err: UnicodeError) -> tuple[str, int]:
    if not isinstance(err, UnicodeDecodeError):
        raise err
    return "".join(f"<0x{b:02X}>" for b in err.object[err.start:err.end]), err.end


codecs.register_error(PARTIAL_BYTES, _partial_bytes)


def _import_tokenizers(named: str = "--tokenizer"):
    try:
        import tokenizers
    except ImportError:
        raise OptionalDependencyError(
            f"{named} needs the optional 'tokenizers' package: {TOKENIZERS_INSTALL}") from None
    return tokenizers


def load_tokenizer(path: str | Path, named: str | None = None) -> TokenizerView:
    """Load a tokenizer for showing sequences as tokens (and for its facts: :func:`tokenizer_facts`).

    Args:
        path: a ``tokenizer.json`` file (Hugging Face fast tokenizer); a GPT-2 style ``vocab.json``
            whose folder also holds ``merges.txt`` (byte-level BPE); a WordPiece ``vocab.txt``; or a
            folder holding one of these (``tokenizer.json`` first, then ``vocab.json`` +
            ``merges.txt``, then ``vocab.txt``).
        named: how the messages name the path (default ``--tokenizer PATH``; ``[tokens] tokenizer =
            'PATH'`` for the config key).

    Returns:
        The :class:`TokenizerView`. Padding and truncation stored in a ``tokenizer.json`` are
        switched off (MiniLM's file pads every encoding to 128).

    Raises:
        OptionalDependencyError: ``tokenizers`` is not installed (the message gives the install command).
        UsageError: nothing loadable at ``path``, or the files do not parse.
    """
    p = Path(path)
    said = named if named is not None else f"--tokenizer {path}"
    if not p.exists():
        # a config's relative path is read from the config file's folder, not the current one: say where
        where = "" if named is None or str(p) in said else f" (looked for {p}: a relative path is relative to the config file's folder)"
        raise UsageError(f"{said}: no such file or folder; give tokenizer.json, "
                         f"vocab.json (with merges.txt beside it) or a folder holding them{where}")
    tk = _import_tokenizers("--tokenizer" if named is None else "[tokens] tokenizer")
    found = tokenizer_file(p)  # the rule [tokens] tokenizer follows too
    if found is None:
        raise UsageError(f"{said}: the folder holds no tokenizer.json, vocab.json + merges.txt (nor one "
                         "PREFIX-vocab.json + PREFIX-merges.txt) or vocab.txt")
    p = found
    at = said if named is not None else f"--tokenizer {p}"  # a file found in a folder is named itself
    try:
        # GPT-2 style pair: vocab.json + merges.txt, or PREFIX-vocab.json + PREFIX-merges.txt
        paired = p.parent / (p.name[: -len("vocab.json")] + "merges.txt") if p.name.endswith("vocab.json") else None
        if p.name.endswith("vocab.json") or (p.suffix == ".json" and (p.parent / "merges.txt").is_file()
                                             and p.name != "tokenizer.json"):
            merges = paired if paired is not None and paired.is_file() else p.parent / "merges.txt"
            if not merges.is_file():
                raise UsageError(f"{at}: a GPT-2 style vocab.json needs merges.txt "
                                 f"({paired.name if paired is not None else 'merges.txt'}) in the same folder")
            tok = tk.ByteLevelBPETokenizer(str(p), str(merges))
            source = f"{p} + {merges.name}"
        elif p.suffix == ".txt":
            tok = tk.BertWordPieceTokenizer(str(p), lowercase=True)
            source = str(p)
        else:
            tok = tk.Tokenizer.from_file(str(p))
            tok.no_padding()
            tok.no_truncation()
            source = str(p)
    except UsageError:
        raise
    except Exception as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{at}: cannot load {p.name if named is not None else 'it'} as a tokenizer: {msg}") from None
    decoder = getattr(tok, "decoder", None)
    return TokenizerView(tokenizer=tok, source=source, vocab_size=_id_bound(tok),
                         byte_level=type(decoder).__name__ == "ByteLevel")


def _id_bound(tok: Any) -> int:
    """One more than the largest id of ``tok`` (``tokenizers``), added tokens included: the ids
    its vocabulary holds lie in ``[0, bound)``. Not ``get_vocab_size``, which counts tokens: a
    vocabulary with a gap (a ``[PAD]`` added at id 50 beside ids 0-3) holds ids up to 50 with 5
    tokens, and id 50 is then no out-of-vocabulary id."""
    size = int(tok.get_vocab_size(with_added_tokens=True))
    ids = tok.get_vocab(with_added_tokens=True).values()
    return max(size, max(ids) + 1) if ids else size




# --------------------------------------------------------------------------------------------- facts
#: the special-token roles whose ids ``[tokens]`` takes from a tokenizer: config key -> the key a
#: Hugging Face ``tokenizer_config.json`` / ``special_tokens_map.json`` names the token under
SPECIAL_ROLES = {"pad_token_id": "pad_token", "eos_token_id": "eos_token", "bos_token_id": "bos_token"}
#: the files beside the tokenizer that declare which token plays which role, as transformers reads
#: them: ``tokenizer_config.json``, and ``special_tokens_map.json`` where the former has no
#: ``added_tokens_decoder`` (transformers' legacy path, whose values then win)
DECLARATION_FILES = ("tokenizer_config.json", "special_tokens_map.json")
#: the model files beside a tokenizer (a Hub model folder, e.g. openai-community/gpt2) whose
#: ``eos_token_id`` transformers' ``generate`` stops at, in the order transformers reads them:
#: ``generation_config.json`` (``GenerationConfig.from_pretrained``), and only where that file is
#: absent ``config.json`` (``GenerationConfig.from_pretrained(config_file_name="config.json",
#: _from_model_config=True)``: transformers 5.x ``generation/utils.py``, the ``except OSError`` path
#: of the model's generation-config load; ``GenerationConfig.from_model_config`` takes an unset value
#: from its ``decoder`` / ``generator`` / ``text_config`` section). Read for the eos id only, and only
#: where no :data:`DECLARATION_FILES` entry names an eos token (:func:`_model_eos`)
MODEL_EOS_FILES = ("generation_config.json", "config.json")
#: the sub-configs ``GenerationConfig.from_model_config`` reads an unset value from, in its order
_DECODER_SECTIONS = ("decoder", "generator", "text_config")


#: the SentencePiece model files of transformers' slow tokenizers (Llama/Mistral ``tokenizer.model``,
#: T5 ``spiece.model``, XLM-R ``sentencepiece.bpe.model``): a folder holding only one of them (no
#: tokenizer.json) is read by transformers for its chat template, but the ``tokenizers`` package
#: reads no vocabulary from it, so it gives no fact (the config's ``[tokens]`` keys stay as written)
SENTENCEPIECE_FILES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
#: how the name of a file that ``[tokens] tokenizer`` names ends when the vocabulary is read from
#: that file itself (:func:`_named_file`): a fast tokenizer's ``tokenizer.json``, a GPT-2 style
#: ``vocab.json`` (also under a prefix: Megatron-LM's ``gpt2-vocab.json``), a WordPiece ``vocab.txt``
NAMED_FILE_ENDINGS = ("tokenizer.json", "vocab.json", "vocab.txt")


@dataclass(frozen=True)
class TokenizerFacts:
    """What ``[tokens]`` can take from a tokenizer.

    Attributes:
        source: the file(s) the vocabulary was read from (:attr:`TokenizerView.source`).
        vocab_size: the number of ids the tokenizer can produce, ``[0, vocab_size)``: its base
            vocabulary plus its added tokens, i.e. ``get_vocab_size(with_added_tokens=True)`` of the
            ``tokenizers`` library, raised to the largest id + 1 where the ids have a gap
            (:attr:`TokenizerView.vocab_size`). Added tokens count because the tokenizer emits them
            (SmolLM-135M's ``[PAD]`` is id 49152, past its 49152 base tokens), so an embedding of
            fewer rows cannot take every id it produces; transformers' ``len(tokenizer)`` counts
            the same tokens but not a gap's ids. None for a folder whose only tokenizer file is a
            SentencePiece model (:data:`SENTENCEPIECE_FILES`): no fact is read from it.
        ids: the config keys of :data:`SPECIAL_ROLES` the tokenizer's files declare, with the id of
            the declared token (a role no file names, or a token not in the vocabulary, is absent:
            GPT-2 declares no pad token and none is made up); ``eos_token_id`` where no declaration
            file names an eos token: the id the model files state (:func:`_model_eos`).
    """

    source: str
    vocab_size: int | None
    ids: dict[str, int]


def _read_doc(f: Path, given: str) -> dict[str, Any]:
    """``f`` as a JSON object.

    Raises:
        UsageError: ``f`` is not a readable JSON object (the file and the reason)."""
    try:
        doc = read_json_file(f)
    except (JsonInputError, OSError) as exc:
        raise UsageError(f"[tokens] tokenizer = {given!r}: cannot read {f}: {exc}; fix or remove the file "
                         "(it says which tokens are pad, eos and bos)") from None
    if not isinstance(doc, dict):
        raise UsageError(f"[tokens] tokenizer = {given!r}: {f} is not a JSON object; fix or remove the file "
                         "(it says which tokens are pad, eos and bos)")
    return doc


def _declared(folder: Path, given: str) -> dict[str, str | None]:
    """The token text of each :data:`SPECIAL_ROLES` role the folder's :data:`DECLARATION_FILES` name
    (a string, or an ``AddedToken`` dict's ``content``; None: an explicit null, no such token), by
    transformers' rule (``PreTrainedTokenizerBase._from_pretrained``): ``tokenizer_config.json``,
    overridden by ``special_tokens_map.json`` when the former has no ``added_tokens_decoder``. A role
    neither file names is absent (transformers then takes its tokenizer class's default, which is not
    guessed here). Neither file present: nothing is declared.

    Raises:
        UsageError: a declaration file that is not a readable JSON object (the file and the reason).
    """
    docs: dict[str, dict[str, Any]] = {}
    for name in DECLARATION_FILES:
        f = folder / name
        if f.exists():
            docs[name] = _read_doc(f, given)
    config = docs.get("tokenizer_config.json", {})
    layers = [config] + ([docs.get("special_tokens_map.json", {})] if "added_tokens_decoder" not in config else [])
    out: dict[str, str | None] = {}
    for key, field in SPECIAL_ROLES.items():
        for layer in layers:
            if field not in layer:
                continue
            v = layer[field]
            text = v.get("content") if isinstance(v, dict) else v
            out[key] = text if isinstance(text, str) else None  # null: the file says there is none
    return out


def _one_id(v: Any) -> int | None:
    """An eos id as a model file states it: an integer, or a list of exactly one (JSON ``true`` is no
    id); None for anything else, a list of several ids included (Llama 3's ``[128001, 128008, 128009]``:
    no single eos is picked from it; ``[tokens] eot_token_ids`` is where such ids go)."""
    if isinstance(v, list) and len(v) == 1:
        v = v[0]
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _model_eos(folder: Path, given: str) -> int | None:
    """The eos id the folder's model files state (:data:`MODEL_EOS_FILES`, transformers' order):
    ``generation_config.json``'s ``eos_token_id`` when that file is there (config.json is then not
    read), else ``config.json``'s (top level, else its first :data:`_DECODER_SECTIONS` section that
    sets it); None when the deciding file states none, or not one id (:func:`_one_id`), or is not a
    readable JSON object (a fallback for the eos alone: a folder's unrelated or broken model file
    never fails the audit; the eos then stays unset, and the checks that need it say so)."""
    for name in MODEL_EOS_FILES:
        f = folder / name
        if not f.is_file():
            continue
        try:
            doc = _read_doc(f, given)
        except UsageError:
            return None
        v = doc.get("eos_token_id")
        if v is None and name == "config.json":
            v = next((sec["eos_token_id"] for k in _DECODER_SECTIONS
                      if isinstance(sec := doc.get(k), dict) and sec.get("eos_token_id") is not None), None)
        return _one_id(v)
    return None


def tokenizer_facts(path: str, given: str) -> TokenizerFacts:
    """The facts of the tokenizer of ``[tokens] tokenizer``: its vocabulary size and the ids of the
    pad, eos and bos tokens its files declare (:class:`TokenizerFacts`).

    The vocabulary is read by :func:`load_tokenizer` from the file ``path`` names (a Megatron
    ``gpt2-tiny-vocab.json`` with its ``gpt2-tiny-merges.txt``), or from the folder ``path`` names by
    :func:`datacheck.derive.tokfiles.tokenizer_file`'s rule; the roles from its folder's
    :data:`DECLARATION_FILES` (:func:`_declared`), each token looked up in the loaded vocabulary
    (added tokens included). A role transformers would take from a tokenizer class's defaults
    when no file names it (GPT-2's ``<|endoftext|>``) is not guessed. The eos id only, where
    neither declaration file names an eos token (nor says null), is taken from the model files
    beside the tokenizer (:data:`MODEL_EOS_FILES`: a Hub model folder such as GPT-2's, whose
    ``tokenizer_config.json`` is ``{"model_max_length": 1024}`` and whose ``config.json`` and
    ``generation_config.json`` say ``"eos_token_id": 50256``), when it is one id inside the
    vocabulary (``tokenizer.json``'s ``added_tokens`` mark tokens special but name no role, so
    they decide nothing: transformers maps them to a role only once the role is named).

    Args:
        path: the tokenizer file or folder, anchored at the config's folder
            (:meth:`datacheck.model.config.Config.tokenizer_path`).
        given: the value as written in the config, for messages.

    Raises:
        UsageError: no such path, a FIFO/device/socket in the folder, no file the ``tokenizers``
            package reads in the folder, files that do not load, or an unreadable declaration file; each names ``[tokens] tokenizer``, the
            path and what to do (exit 2).
        OptionalDependencyError: ``tokenizers`` is not installed (the install command).
    """
    folder, stamp = _folder_stamp(path, given)
    return _facts_of(str(folder), stamp, given, _named_file(path))


def _folder_stamp(path: str, given: str) -> tuple[Path, tuple[tuple[str, int, int, int, int], ...]]:
    """The tokenizer's folder (``path`` itself, or the folder of the file it names) and its stamp:
    each file's name, size, modification and status-change times and inode (any write changes the
    status-change time, also one that puts the old size and modification time back; empty when the
    path is missing), the key under which what is read from the folder is cached.

    Raises:
        UsageError: a FIFO/device/socket in the folder (:func:`refuse_special_files`)."""
    p = Path(path)
    folder = p if p.is_dir() or not p.exists() else p.parent
    if not p.exists():
        return folder, ()
    refuse_special_files(folder, given)
    return folder, tuple(sorted((f.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                                for f in folder.iterdir() if f.is_file() and (st := f.stat())))


def _named_file(path: str) -> str | None:
    """The tokenizer file ``[tokens] tokenizer`` names itself, a name ending as one of
    :data:`NAMED_FILE_ENDINGS` (``gpt2-tiny-vocab.json``, a ``vocab.txt`` beside a
    ``tokenizer.json``): the vocabulary is read from that file, as ``inspect --tokenizer FILE`` reads
    it, not from the first file the folder rule finds. None for a folder, a missing path or any
    other file of the folder (``tokenizer_config.json``, a SentencePiece model), which names its folder."""
    p = Path(path)
    return str(p) if p.is_file() and p.name.endswith(NAMED_FILE_ENDINGS) else None


@functools.lru_cache(maxsize=16)
def _facts_of(where: str, stamp: tuple[tuple[str, int, int, int, int], ...], given: str,
              file: str | None = None) -> TokenizerFacts:
    """:func:`tokenizer_facts` of the folder ``where`` (its vocabulary from ``file`` when the config
    names a file: :func:`_named_file`), read once per ``stamp`` (:func:`_folder_stamp`:
    an edited file is read again) within a process, as the chat template's
    tokenizer is (a library caller auditing in a loop loads it once)."""
    folder = Path(where)
    named = f"[tokens] tokenizer = {given!r}"
    if file is None and folder.exists() and tokenizer_file(folder) is None:
        model = next((f for f in SENTENCEPIECE_FILES if (folder / f).is_file()), None)
        if model is not None:  # a slow SentencePiece tokenizer: transformers reads it, the tokenizers package cannot
            return TokenizerFacts(source=str(folder / model), vocab_size=None, ids={})
        raise UsageError(f"{named}: {folder} holds no tokenizer.json, vocab.json + merges.txt (nor one "
                         "PREFIX-vocab.json + PREFIX-merges.txt) or vocab.txt, from which "
                         "datacheck reads the tokenizer's vocabulary size and its pad/eos/bos ids; save the "
                         "tokenizer there with tokenizer.save_pretrained(folder) (it writes tokenizer.json)")
    view = load_tokenizer(file if file is not None else folder, named=named)
    ids = {}
    declared = _declared(folder, given)
    for key, text in declared.items():
        i = view.tokenizer.token_to_id(text) if text is not None else None
        if i is not None:
            ids[key] = int(i)
    if "eos_token_id" not in declared:
        eos = _model_eos(folder, given)
        if eos is not None and 0 <= eos < view.vocab_size:
            ids["eos_token_id"] = eos
    return TokenizerFacts(source=view.source, vocab_size=view.vocab_size, ids=ids)


def with_tokenizer_facts(cfg: Config) -> Config:
    """``cfg`` with the facts of its ``[tokens] tokenizer`` (:func:`tokenizer_facts`:
    the vocabulary size, and the pad/eos/bos ids the tokenizer declares) filled where ``[tokens]``
    leaves them unset (:meth:`datacheck.model.config.Config.with_tokenizer_facts`: the config's own values win; the report's
    ``tokenizer_facts`` says which were filled). ``cfg`` unchanged when no tokenizer is set. ``audit``
    (a part too), ``inspect``, ``clean`` and trace's row audit check with the same facts.

    Raises:
        UsageError: the tokenizer cannot be loaded (the path and what to do); ConfigError when
            ``[tokens] vocab_size`` is smaller than the tokenizer's count (both named).
        OptionalDependencyError: the ``tokenizers`` package is missing.
    """
    path = cfg.tokenizer_path()
    if path is None or cfg.tokens.tokenizer is None:
        return cfg
    facts = tokenizer_facts(path, cfg.tokens.tokenizer)
    return cfg.with_tokenizer_facts(facts.vocab_size, facts.ids, facts.source)


def blank_token_ids(path: str, given: str) -> tuple[int, ...] | None:
    """The ids of the ``[tokens] tokenizer`` whose token, decoded alone, is empty or whitespace only
    (``"Ġ"`` -> ``" "``, ``"ĊĊ"`` -> ``"\\n\\n"``, SentencePiece ``"▁"``, byte fallback ``<0x0A>``): a
    response made of such tokens (and special ids) says nothing (``pref.empty_response``).

    Each id of the vocabulary (added tokens included) is decoded once, on its own, by
    :meth:`TokenizerView.decode` (byte-level BPE through GPT-2's byte alphabet, other tokenizers
    through their own decoder, special tokens kept as their text, so ``<|endoftext|>`` is not
    blank); a token that holds part of a UTF-8 character is not blank (its bytes show as
    ``<0xE2>``). Blank means what ``pref.empty_response`` means by it for text: nothing left after
    polars' ``str.strip_chars()`` (Unicode White_Space). The set is built once per tokenizer folder
    and its files' sizes and modification times, within a process.

    Args:
        path: the tokenizer file or folder, anchored (:meth:`datacheck.model.config.Config.tokenizer_path`).
        given: the value as written in the config, for messages.

    Returns:
        The ids, ascending; None when the folder's only tokenizer file is a SentencePiece model
        (:data:`SENTENCEPIECE_FILES`), whose vocabulary the ``tokenizers`` package does not read.

    Raises:
        UsageError: no such path or files that do not load (as :func:`tokenizer_facts`).
        OptionalDependencyError: ``tokenizers`` is not installed.
    """
    folder, stamp = _folder_stamp(path, given)
    return _blank_ids_of(str(folder), stamp, given, _named_file(path))


@functools.lru_cache(maxsize=16)
def _blank_ids_of(where: str, stamp: tuple[tuple[str, int, int, int, int], ...], given: str,
                  file: str | None = None) -> tuple[int, ...] | None:
    """:func:`blank_token_ids` of the folder ``where`` (the vocabulary of ``file`` when the config
    names one), read once per ``stamp``. polars is imported here,
    not with the module: :class:`datacheck.torch.BatchGuard` takes the tokenizer's facts through this
    module, and what the training loop imports stays polars-free."""
    import polars as pl

    if _facts_of(where, stamp, given, file).vocab_size is None:  # a SentencePiece model only: no vocabulary read
        return None
    view = load_tokenizer(file if file is not None else where, named=f"[tokens] tokenizer = {given!r}")
    ids = sorted(int(i) for i in view.tokenizer.get_vocab(with_added_tokens=True).values())
    if view.byte_level:
        texts = [view.decode([i]) for i in ids]
    else:
        texts = [str(t) for t in view.tokenizer.decode_batch([[i] for i in ids], skip_special_tokens=False)]
    blank = pl.Series(texts, dtype=pl.String).str.strip_chars().str.len_chars() == 0
    return tuple(pl.Series(ids, dtype=pl.Int64).filter(blank).to_list())


# ------------------------------------------------------------------ blank text split into byte tokens
#: Unicode ``White_Space`` (what polars' ``str.strip_chars()`` and Rust's ``char::is_whitespace``
#: strip): U+0009-U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F,
#: U+205F, U+3000 (Unicode PropList.txt).
WHITE_SPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))
               + "\u2028\u2029\u202f\u205f\u3000")
#: a SentencePiece byte-fallback token (Llama's ``<0xE3>``): one byte, by its hex value
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _piece_pattern() -> re.Pattern[bytes]:
    """Bytes that can sit inside a run of white space's UTF-8 bytes without being whole characters:
    an optional tail of a multi-byte white-space character (``\\x80`` of U+3000's ``E3 80 80``),
    whole white-space characters, an optional head of one (``\\xe3\\x80``); or any inner part of
    one (``\\x9a`` of U+1680's ``E1 9A 80``)."""
    multi = [ch.encode() for ch in WHITE_SPACE if len(ch.encode()) > 1]
    heads = {e[:i] for e in multi for i in range(1, len(e))}
    tails = {e[i:] for e in multi for i in range(1, len(e))}
    inner = {e[i:j] for e in multi for i in range(len(e)) for j in range(i + 1, len(e) + 1)} - set(multi)

    def alt(parts: set[bytes]) -> bytes:
        return b"|".join(re.escape(p) for p in sorted(parts, key=lambda p: (-len(p), p)))

    whole = alt({ch.encode() for ch in WHITE_SPACE})
    return re.compile(b"(?:" + alt(inner) + b")|(?:(?:" + alt(tails) + b")?(?:" + whole + b")*(?:"
                      + alt(heads) + b")?)")


_PIECE = _piece_pattern()


@dataclass(frozen=True)
class BlankPieces:
    """Tokens that hold only part of a white-space character's UTF-8 bytes (byte-level BPE splits
    U+3000 into ``ãĢ`` + ``Ģ``; a SentencePiece byte-fallback tokenizer into ``<0xE3>`` ``<0x80>``
    ``<0x80>``): alone they decode to no character, together to white space. A response of such
    tokens (with white-space and special tokens) says nothing, as its text would; a response whose
    byte tokens make a real character (``ãģ`` + ``Ĥ``: U+3042) says something.

    Attributes:
        pieces: the ids of such tokens, ascending.
        bytes_of: the UTF-8 bytes each of ``pieces`` and each white-space token (the ids
            :func:`blank_token_ids` gives) stands for.
    """

    pieces: tuple[int, ...]
    bytes_of: dict[int, bytes]

    def says_nothing(self, ids: list[int | None]) -> bool:
        """Whether token ids ``ids`` (the others being special ids, which stand for no text) decode,
        joined as their bytes, to valid UTF-8 of :data:`WHITE_SPACE` characters only."""
        raw = b"".join(self.bytes_of.get(i, b"") for i in ids if i is not None)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return all(ch in WHITE_SPACE for ch in text)


def blank_token_pieces(path: str, given: str) -> BlankPieces | None:
    """The :class:`BlankPieces` of the ``[tokens] tokenizer`` (``pref.empty_response``: a response of
    byte tokens that make only white space is empty).

    A token's bytes: byte-level BPE tokens through GPT-2's byte alphabet; a SentencePiece
    byte-fallback token ``<0xNN>`` is byte NN; a white-space token of another tokenizer its text
    (``▁`` as a space). A token is a piece when its bytes are not valid UTF-8 alone and match
    :func:`_piece_pattern` (they can sit inside white space). Read once per tokenizer folder and its
    files' sizes and modification times, within a process.

    Returns:
        None where :func:`blank_token_ids` gives None (a SentencePiece model only).

    Raises:
        UsageError, OptionalDependencyError: as :func:`blank_token_ids`.
    """
    folder, stamp = _folder_stamp(path, given)
    return _blank_pieces_of(str(folder), stamp, given)


def _token_bytes(view: TokenizerView, token: str) -> bytes | None:
    """The bytes ``token`` stands for (see :func:`blank_token_pieces`), None when it is no byte run."""
    if view.byte_level:
        if all(ch in _GPT2_BYTE_OF for ch in token):
            return bytes(_GPT2_BYTE_OF[ch] for ch in token)
        return None
    m = _BYTE_TOKEN.fullmatch(token)
    return bytes([int(m.group(1), 16)]) if m else None


@functools.lru_cache(maxsize=16)
def _blank_pieces_of(where: str, stamp: tuple[tuple[str, int, int, int, int], ...], given: str) -> BlankPieces | None:
    """:func:`blank_token_pieces` of the folder ``where``, read once per ``stamp``."""
    blank = _blank_ids_of(where, stamp, given)
    if blank is None:
        return None
    view = load_tokenizer(where, named=f"[tokens] tokenizer = {given!r}")
    vocab = view.tokenizer.get_vocab(with_added_tokens=True)
    blank_set = set(blank)
    bytes_of: dict[int, bytes] = {}
    pieces = []
    for token, i in vocab.items():
        raw = _token_bytes(view, token)
        if int(i) in blank_set:  # a white-space token: its bytes (or its text, ▁ as a space)
            bytes_of[int(i)] = raw if raw is not None else token.replace("\u2581", " ").encode()
            continue
        if raw is None or not _PIECE.fullmatch(raw):
            continue
        try:
            raw.decode("utf-8")
            continue  # whole characters: blank alone or not blank at all
        except UnicodeDecodeError:
            pieces.append(int(i))
            bytes_of[int(i)] = raw
    return BlankPieces(tuple(sorted(pieces)), bytes_of)
