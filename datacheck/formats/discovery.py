"""Which files are shards, and of which format: the format rules of discovery, from the registry.

:func:`discover` is :func:`datacheck.io.discover.discover` (listing folders, globs and object
stores; temporary files, metadata, symlinks, Hugging Face ``state.json`` lists) with these rules:

- ``[dataset] format = "auto"`` (default): by extension (every format's ``extensions``, compound
  ones such as ``.jsonl.gz`` first). A ``.json`` file is sniffed (:func:`datacheck.formats.jsonl.sniff`):
  JSON Lines is audited as ``jsonl``, one JSON array of records as ``json``, anything else is
  listed as ignored. A ``.bin`` file is a Megatron shard when its ``.idx`` is beside it
  (:func:`datacheck.formats.megatron.sniff`; the ``.idx`` is its companion, read and hashed with it
  and not listed on its own), a litdata chunk when its folder's ``index.json`` is a litdata index
  (:func:`datacheck.formats.litdata.sniff`); any other ``.bin``, or an ``.idx`` without its ``.bin``,
  is listed as ignored data with the reason.
- a forced format applies only to plausible data files of that format (every format's
  ``forced_extensions``, and files without an extension).
- a ``.txt`` file (also ``.txt.gz``/``.txt.zst``) is a plain-text shard (:mod:`datacheck.formats.text`), as
  Hugging Face ``datasets`` reads a folder of them with its ``text`` builder; but a ``.txt`` file found in a
  folder or by a glob beside shards of another format (a ``notes.txt`` beside parquet shards; or beside
  a ``.bin``/``.idx`` left out for want of its pair) is not
  audited, as ``datasets`` loads only the files of the folder's most common format: it is listed as
  ignored data with the reason (:func:`discover`). A ``.txt`` file named as a PATH is always audited.
  A tokenizer's ``*merges.txt`` / ``*vocab.txt`` (:data:`TOKENIZER_TEXT_FILES`) is never a shard.
- an object in a store: the same rules, except that a ``.bin`` is a Megatron shard when the ``.idx``
  of the same name was listed, a ``.json`` object is sniffed for JSON Lines only, and litdata
  folders are read from local disk only.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from datacheck.formats import jsonl, litdata, megatron, text
from datacheck.formats.registry import FORMATS
from datacheck.io import discover as _discover
from datacheck.io import safejson
from datacheck.io.bounded import special_kind
from datacheck.io.discover import Discovery
from datacheck.model.errors import UsageError

__all__ = ["EXTENSIONS", "FORCED_EXTENSIONS", "RULES", "TEXT_BESIDE_REASON", "TOKENIZER_TEXT_FILES", "ShardRules", "discover",
           "format_of"]

#: extension -> format in auto mode, longest first (compound extensions before their last part)
EXTENSIONS: tuple[tuple[str, str], ...] = tuple(sorted((e for f in FORMATS for e in f.extensions),
                                                       key=lambda e: -len(e[0])))
#: The extensions a forced ``[dataset] format`` accepts (plus files without an extension): the
#: readers decompress ``.gz``/``.zst`` JSON Lines and ``.gz`` CSV/TSV.
FORCED_EXTENSIONS: dict[str, tuple[str, ...]] = {n: e for f in FORMATS for n, e in f.forced_extensions.items()}
#: Extensions that look like data (a file with one that is not audited is listed in ``ignored``).
_DATA_LIKE = tuple(sorted({e for exts in FORCED_EXTENSIONS.values() for e in exts}, key=len, reverse=True))


#: the endings of a tokenizer's vocabulary and merges files (``gpt2-tiny-merges.txt``,
#: ``bert-base-uncased-vocab.txt``, sentencepiece's ``spm.vocab`` is no ``.txt``): never a plain-text
#: shard in ``format = "auto"``, whatever their prefix (the exact names are metadata to discovery)
TOKENIZER_TEXT_FILES = ("merges.txt", "vocab.txt")


def _tokenizer_file(name: str) -> bool:
    return name.lower().endswith(TOKENIZER_TEXT_FILES)


def format_of(path: Path, forced: str = "auto") -> str | None:
    """The shard format of the local file ``path``, or None when it is not a shard in this mode.

    ``forced == "auto"``: by extension, else by the formats' sniffers (a ``.json`` or ``.bin`` file).
    A forced format: that format, for a file whose extension is in :data:`FORCED_EXTENSIONS` for it or
    that has no extension; None otherwise.
    """
    name = path.name.lower()
    if forced != "auto":
        if name.endswith(FORCED_EXTENSIONS.get(forced, ())) or "." not in name.lstrip("."):
            return forced
        return None
    for ext, fmt in EXTENSIONS:
        if name.endswith(ext):
            return None if fmt == text.FORMAT.name and _tokenizer_file(name) else fmt
    for f in FORMATS:
        got = f.sniff(path) if f.sniff is not None else None
        if got is not None:
            return got
    return None


class ShardRules:
    """The format rules :func:`datacheck.io.discover.discover` applies (see the module docstring)."""

    forced_extensions = FORCED_EXTENSIONS
    unlisted_arrow_reason = ("not listed in state.json _data_files (a Dataset.map cache file?): the dataset loader "
                             "ignores it; reported as index.extra_shard")

    def format_of(self, path: Path, forced: str) -> str | None:
        return format_of(path, forced)

    def format_of_object(self, key: str, forced: str, names: set[str], fs: Any) -> str | None:
        """The format of the object ``key`` of a store listing ``names`` (``fs``: its filesystem)."""
        lname = key.rpartition("/")[2].lower()
        stem = key.rpartition(".")[0]
        if forced == "auto" and lname.endswith(".bin"):
            return "megatron" if stem + ".idx" in names else None
        if forced == "auto" and lname.endswith(".json") and not any(lname.endswith(e) for e, _ in EXTENSIONS):
            return "jsonl" if jsonl.sniff_lines_object(fs, key) else None
        return format_of(Path(key.rpartition("/")[2]), forced)

    def is_companion(self, path: Path, forced: str) -> bool:
        """A local file read and hashed with another shard (a Megatron ``.idx`` beside its ``.bin``)."""
        return forced == "auto" and megatron.is_index_of_pair(path)

    def is_companion_object(self, key: str, forced: str, names: set[str]) -> bool:
        """An object read and hashed with another listed shard (a Megatron ``.idx``)."""
        return forced == "auto" and key.lower().endswith(".idx") and key.rpartition(".")[0] + ".bin" in names

    def why_not(self, name: str, forced: str, remote: bool = False, path: Path | None = None) -> str | None:
        """Why a data-looking file is not a shard in this mode (None: not data-looking); ``path``: the
        local file, so that a ``.bin`` whose ``.idx`` is there but unreadable (a broken symlink of a
        partial hub download, a folder, a FIFO) is said to be so."""
        if path is not None and name.lower().endswith(".bin") and forced == "auto":
            why = _unreadable_index(path) or _unusable_litdata_index(path)
            if why is not None:
                return why
        name = name.lower()
        if forced == "auto" and _tokenizer_file(name):
            return None  # a tokenizer's file, not data
        if forced != "auto":
            if name.endswith(_DATA_LIKE) or any(name.endswith(e) for e, _ in EXTENSIONS):
                return f"its extension does not fit [dataset] format = {forced!r}"
            return None
        if name.endswith(".bin"):
            if remote:
                return ("a .bin object without a Megatron .idx of the same name beside it (litdata folders are "
                        "read from local disk only: download the folder first)")
            return ("a .bin file with neither a Megatron .idx of the same name beside it nor a litdata index.json in "
                    "its folder: no format to read it with")
        if name.endswith(".idx"):
            return "a Megatron .idx without its .bin (a missing or partial download?)"
        if name.endswith(".json"):
            return ("a .json file that is not JSON Lines (one object per line) nor a JSON array of records; "
                    "a single JSON document is not a shard")
        if name.endswith(_DATA_LIKE):
            return "no format for this extension; set [dataset] format (csv, tsv, jsonl or text) to audit it"
        return None


def _unreadable_index(bin_path: Path) -> str | None:
    """Why the Megatron ``.idx`` beside ``bin_path`` cannot be read although a file of that name is
    there (None: it is absent, or a regular file)."""
    idx = megatron.companion_index(bin_path)
    if not os.path.lexists(idx):
        return None
    what = None
    if os.path.islink(idx) and not os.path.exists(idx):
        try:
            target = os.readlink(idx)
        except OSError:
            target = "?"
        what = (f"a broken symlink (to {target}: a file not downloaded, or a symlink loop)")
    elif idx.is_dir():
        what = "a folder"
    elif (kind := special_kind(idx)) is not None:
        what = f"not a regular file ({kind})"
    if what is None:
        return None
    return f"a Megatron .bin whose {idx.name} beside it is {what}: the pair cannot be read"


def _unusable_litdata_index(bin_path: Path) -> str | None:
    """Why the ``index.json`` beside a ``.bin`` (no Megatron ``.idx``) does not make it a litdata chunk,
    when there is one (None: there is none)."""
    index = bin_path.parent / "index.json"
    if megatron.companion_index(bin_path).exists() or not os.path.lexists(index):
        return None
    try:
        doc = safejson.read_json_file(index)
    except safejson.JsonInputError as exc:
        return f"a .bin whose folder's index.json does not parse ({exc.reason}): not read as a litdata chunk"
    except OSError as exc:
        return f"a .bin whose folder's index.json cannot be read ({getattr(exc, 'reason', None) or exc.strerror or exc})"
    if not litdata.is_litdata_index(doc):
        return ("a .bin whose folder's index.json is not a litdata index (no \"chunks\" list and \"config\" object) "
                "and with no Megatron .idx beside it: no format to read it with")
    return None


#: the rules discovery applies
RULES = ShardRules()


def discover(paths: list[str], forced_format: str = "auto", follow_symlinks: bool = False) -> Discovery:
    """Resolve PATH arguments into shards under one root (:func:`datacheck.io.discover.discover` with
    the formats' rules, :data:`RULES`), then, in ``format = "auto"``, leave out the plain-text files
    found beside shards of another format (:func:`_text_beside_others`). Raises ``UsageError`` as it does."""
    disc = _discover.discover(paths, forced_format, follow_symlinks, rules=RULES)
    return _text_beside_others(disc, paths) if forced_format == "auto" else disc


#: why a ``.txt`` file beside shards of another format is not audited in ``format = "auto"``
TEXT_BESIDE_REASON = ("a .txt file beside shards of another format ({formats}): Hugging Face datasets loads only the "
                      "files of a folder's most common format, so it is not audited (name it as a PATH, or set "
                      "[dataset] format = \"text\", to audit it as a plain-text corpus)")


def _text_beside_others(disc: Discovery, paths: list[str]) -> Discovery:
    """``disc`` without the ``text`` shards that were not named as a PATH when it also holds shards of
    another format, or a ``.bin``/``.idx`` left out for want of its pair (a Megatron folder whose
    ``.idx`` is missing: its GPTDataset cache's ``*-description.txt`` files are no corpus): those move to
    ``ignored`` / ``ignored_data`` with :data:`TEXT_BESIDE_REASON`.

    Raises:
        UsageError: no shard is left (the message of :func:`datacheck.io.discover.discover`)."""
    others = sorted({s.format for s in disc.shards if s.format != text.FORMAT.name}
                    | {"an unpaired " + i["path"].rpartition(".")[2] for i in disc.ignored_data
                       if i["path"].lower().endswith((".bin", ".idx"))})
    if not others:
        return disc
    named = {os.path.abspath(p) for p in paths}
    left = [s for s in disc.shards if s.format == text.FORMAT.name and s.url is None and str(s.path) not in named
            or s.format == text.FORMAT.name and s.url is not None and s.url not in paths]
    if not left:
        return disc
    why = TEXT_BESIDE_REASON.format(formats=", ".join(others))
    disc.shards = [s for s in disc.shards if s not in left]
    disc.ignored = sorted(disc.ignored + [s.rel for s in left])
    disc.ignored_data = sorted(disc.ignored_data + [{"path": s.rel, "reason": why} for s in left], key=lambda i: i["path"])
    if not disc.shards and not disc.temp_files:
        raise UsageError(_discover.no_shards_message(paths, disc, "auto", RULES))
    return disc
