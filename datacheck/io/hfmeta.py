"""Hugging Face ``save_to_disk`` metadata: the one parser of a split's ``state.json``.

``Dataset.save_to_disk`` writes, per split folder, ``data-XXXXX-of-NNNNN.arrow`` files (Arrow IPC
streams), ``dataset_info.json`` and ``state.json``; ``state.json`` lists the split's data files as
``"_data_files": [{"filename": "data-00000-of-00001.arrow"}, ...]`` (names relative to the folder)
and names the split in ``"_split"``. ``load_from_disk`` reads only the listed files.

Used by discovery (which ``.arrow`` files are shards), the shipped-list check of
:mod:`datacheck.io.dataindex` and ``datacheck clean`` (which rewrites the metadata of the copy).
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datacheck.io.cardpath import CARD_NAME
from datacheck.io.safejson import MAX_JSON_FILE_BYTES, JsonInputError, loads, read_json_file
from datacheck.io.textboms import wide_bom
from datacheck.model.errors import UsageError

__all__ = ["STATE_NAME", "DATASET_DICT_NAME", "INFO_NAME", "HfState", "HfDatasetDict", "parse_state", "read_state", "features_of_info_json",
           "hf_data_files", "read_dataset_dict", "class_label_names", "tag_label_names", "is_list_feature",
           "features_of_schema_metadata",
           "read_info_features", "README_NAME", "readme_features", "declares_configs", "card_front_text", "read_card", "card_of",
           "card_text_problem",
           "front_of", "front_features", "parse_front"]

#: File name of a split's state in a ``save_to_disk`` folder.
STATE_NAME = "state.json"
#: File name of a ``DatasetDict.save_to_disk`` folder's split list (``{"splits": ["train", "test"]}``).
DATASET_DICT_NAME = "dataset_dict.json"
#: The most bytes of ``huggingface`` schema metadata parsed (the bound of any metadata JSON file).
MAX_FEATURES_BYTES = MAX_JSON_FILE_BYTES
#: File name of a split's ``DatasetInfo`` in a ``save_to_disk`` folder (its ``features`` declare the columns).
INFO_NAME = "dataset_info.json"


@dataclass(frozen=True)
class HfState:
    """A parsed ``state.json``.

    Attributes:
        state: the whole JSON object, key order kept.
        files: the ``_data_files`` entries as stored (normally ``{"filename": str}`` objects).
        names: per entry, its ``filename`` when that is a string, else None (same length as ``files``).
        split: ``_split`` when it is a string, else None.
    """

    state: dict[str, Any]
    files: tuple[Any, ...]
    names: tuple[str | None, ...]
    split: str | None

    def plain_names(self) -> set[str] | None:
        """The listed file names when every entry is a plain file name of this folder (non-empty,
        no ``/`` or ``\\``, not ``.`` or ``..``), else None (the index checks refuse such a list)."""
        if all(isinstance(n, str) and n and "/" not in n and "\\" not in n and n not in (".", "..")
               for n in self.names):
            return {n for n in self.names if n is not None}
        return None


def parse_state(data: Any, source: str) -> HfState | None:
    """Parse the JSON value of a ``state.json``.

    Args:
        data: the decoded JSON.
        source: where it came from, for the message.

    Returns:
        The :class:`HfState`, or None when ``data`` is not an object with a ``_data_files`` key
        (not a ``save_to_disk`` split).

    Raises:
        UsageError: ``_data_files`` is there but not a list.
    """
    if not isinstance(data, dict) or "_data_files" not in data:
        return None
    files = data["_data_files"]
    if not isinstance(files, list):
        raise UsageError(f"{source}: _data_files must be a list")
    names = tuple(f.get("filename") if isinstance(f, dict) and isinstance(f.get("filename"), str) else None
                  for f in files)
    split = data.get("_split") if isinstance(data.get("_split"), str) else None
    return HfState(state=data, files=tuple(files), names=names, split=split)


def read_state(folder: Path) -> HfState | None:
    """``folder/state.json`` parsed, leniently: None when it is absent, unreadable, not JSON, not an
    object with ``_data_files``, or ``_data_files`` is not a list (the index checks report a broken
    one with the reason; discovery and ``clean`` then treat the folder as a plain folder)."""
    path = Path(folder) / STATE_NAME
    if not path.is_file():
        return None
    try:
        data = read_json_file(path)
        return parse_state(data, str(path))
    except (OSError, JsonInputError, UsageError):
        return None


def hf_data_files(folder: Path) -> set[str] | None:
    """File names that ``folder/state.json`` (a Hugging Face ``save_to_disk`` split) lists in
    ``_data_files``; None when the folder has no such ``state.json``, it cannot be read, or it is not
    a plain list of file names (the ``index`` checks report a broken one). Other ``.arrow`` files of
    that folder (e.g. ``cache-<fingerprint>.arrow`` written by ``Dataset.map``) are not part of the
    dataset: the loader ignores them, so discovery does not audit them (they are reported as
    ``index.extra_shard``).
    """
    st = read_state(folder)
    return st.plain_names() if st is not None else None


@dataclass(frozen=True)
class HfDatasetDict:
    """A parsed ``dataset_dict.json`` (``DatasetDict.save_to_disk``: one subfolder per split).

    Attributes:
        splits: the declared split names in file order (each one a subfolder of the same name).
        problem: why the file cannot be used (not JSON, no ``splits`` list, a name that is not a plain
            folder name), or None. ``splits`` holds the usable names either way.
    """

    splits: tuple[str, ...]
    problem: str | None = None


def _plain_name(n: Any) -> bool:
    return isinstance(n, str) and bool(n) and "/" not in n and "\\" not in n and n not in (".", "..")


def read_dataset_dict(path: Path) -> HfDatasetDict | None:
    """``path`` (a ``dataset_dict.json``) parsed with the bounded JSON loader.

    ``datasets`` writes ``{"splits": ["train", "test"]}`` and ``load_from_disk`` opens the subfolder
    named after each split. Returns None when the file is absent; a file that cannot be used gives an
    :class:`HfDatasetDict` whose ``problem`` says why (never an exception: the file is inside the data).
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        data = read_json_file(path)
    except OSError as exc:
        return HfDatasetDict(splits=(), problem=f"cannot read it: {exc.strerror or exc}")
    except JsonInputError as exc:
        return HfDatasetDict(splits=(), problem=f"not valid JSON: {exc.reason}")
    names = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(names, list):
        return HfDatasetDict(splits=(), problem='no "splits" list (datasets writes {"splits": ["train", ...]})')
    good = tuple(dict.fromkeys(n for n in names if _plain_name(n)))
    bad = [n for n in names if not _plain_name(n)]
    problem = (f"split names that are not plain folder names: {', '.join(map(repr, bad[:5]))}" if bad else None)
    return HfDatasetDict(splits=good, problem=problem)


# ------------------------------------------------------------------------------- declared features
def class_label_names(features: Any, column: str) -> tuple[str, ...] | None:
    """The class names a ``datasets`` features dict declares for ``column`` as a ``ClassLabel``.

    ``datasets`` serializes ``ClassLabel(names=[...])`` as ``{"names": [...], "_type": "ClassLabel"}``
    (older versions also write ``"dtype": "int64"`` and ``"num_classes"``); the column then holds
    int64 class indices into ``names`` (``-1``: no label, e.g. GLUE's hidden test labels). Only a
    top-level ``ClassLabel`` counts (a ``Sequence`` of them is a token tag list).

    Args:
        features: the decoded ``features`` object (``dataset_info.json``'s, or the ``info.features`` of
            the ``huggingface`` schema metadata key).
        column: the column name.

    Returns:
        The names (a tuple of str, at least one), or None when ``column`` is no ``ClassLabel`` there or
        its ``names`` is not a non-empty list of distinct strings (nothing is inferred from a malformed
        declaration).
    """
    if not isinstance(features, dict):
        return None
    feat = features.get(column)
    if not isinstance(feat, dict) or feat.get("_type") != "ClassLabel":
        return None
    names = feat.get("names")
    if (not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names)
            or len(set(names)) != len(names)):
        return None
    return tuple(names)


#: the ``_type`` of a ``datasets`` feature holding one list per row: ``Sequence`` (datasets < 4) and ``List``
#: (datasets >= 4, ``Sequence`` is then an alias writing ``List``)
LIST_TYPES = ("Sequence", "List")


def is_list_feature(feat: Any) -> bool:
    """Whether ``feat`` (one column's feature in ``datasets``' JSON form) holds a list per row: a
    ``Sequence``/``List`` object (``{"feature": ..., "_type": "List"}``) or a one-element JSON list (a
    Python list feature ``[Value("int64")]``)."""
    return ((isinstance(feat, dict) and feat.get("_type") in LIST_TYPES)
            or (isinstance(feat, list) and len(feat) == 1))


def tag_label_names(features: Any, column: str) -> tuple[str, ...] | None:
    """The tag names a ``datasets`` features dict declares for ``column`` as a list of ``ClassLabel``:
    token classification tags (NER/POS), e.g. CoNLL-2003's ``ner_tags``, whose rows hold int64 tag
    indices into the names.

    ``datasets`` serializes ``Sequence(ClassLabel(names=[...]))`` as ``{"feature": {"names": [...],
    "_type": "ClassLabel"}, "_type": "Sequence"}`` (older versions add ``"length": -1``), datasets >= 4
    writes ``"_type": "List"``, and a Python list feature ``[ClassLabel(...)]`` is a one-element JSON list.
    One list level only (a list of lists of tags is no token tag list).

    Returns:
        The names (a tuple of str, at least one), or None when ``column`` is not declared so or the
        inner ``ClassLabel`` is malformed (:func:`class_label_names`' rules).
    """
    if not isinstance(features, dict) or not is_list_feature(features.get(column)):
        return None
    feat = features[column]
    inner = feat[0] if isinstance(feat, list) else feat.get("feature")
    return class_label_names({column: inner}, column)


def features_of_schema_metadata(metadata: dict[bytes, bytes] | None) -> Any:
    """The ``features`` object of an Arrow/Parquet schema's ``huggingface`` metadata key
    (``{"info": {"features": {...}}}``, written by ``datasets`` into every parquet and arrow file it
    writes), or None when the key is absent or is not that JSON (bounded loader: nesting, size)."""
    raw = (metadata or {}).get(b"huggingface")
    if raw is None or len(raw) > MAX_FEATURES_BYTES:
        return None
    try:
        data = loads(raw)
    except JsonInputError:
        return None
    info = data.get("info") if isinstance(data, dict) else None
    return info.get("features") if isinstance(info, dict) else None


def features_of_info_json(raw: bytes) -> Any:
    """The ``features`` object of a ``dataset_info.json``'s bytes (one read from an object store), or
    None when they are not that JSON (bounded loader: nesting, size)."""
    if len(raw) > MAX_FEATURES_BYTES:
        return None
    try:
        data = loads(raw)
    except JsonInputError:
        return None
    return data.get("features") if isinstance(data, dict) else None


def read_info_features(folder: Path) -> Any:
    """The ``features`` object of ``folder/dataset_info.json`` (a ``save_to_disk`` split), or None when
    the file is absent, unreadable, not JSON or holds no ``features`` (the file is inside the data:
    never an exception)."""
    path = Path(folder) / INFO_NAME
    if not path.is_file():
        return None
    try:
        data = read_json_file(path)
    except (OSError, JsonInputError):
        return None
    return data.get("features") if isinstance(data, dict) else None


#: File name of a Hugging Face Hub dataset repository's card, whose YAML front matter may declare
#: ``dataset_info: features:`` (the Hub's and ``datasets``' ``load_dataset`` read it).
README_NAME = CARD_NAME
#: The most bytes of a dataset card read for its front matter (PyYAML parses a few MiB a second; Hub
#: cards are kilobytes, a card of hundreds of configs a few hundred KiB).
MAX_README_BYTES = 4 << 20


def declares_configs(front: str | None) -> bool:
    """Whether a dataset card's front matter (:func:`card_front_text`, :func:`front_of`; None: none)
    declares ``configs`` (a line ``configs:`` at its top level): then ``load_dataset`` takes each
    split's files from their ``data_files`` (:mod:`datacheck.io.cardsplits`), not from the Hub's
    file-name rule (:mod:`datacheck.io.hubsplits`). A line test: the YAML is not parsed."""
    return front is not None and any(line.startswith("configs:") for line in front.splitlines())


def card_front_text(path: Path) -> str | None:
    """The YAML front matter of a dataset card (``path``, a ``README.md``): :func:`read_card`'s front
    matter. None when the file is absent, not a regular file, unreadable, not text ``DatasetCard.load``
    reads (:func:`card_text_problem`) or has no front matter within its first :data:`MAX_README_BYTES`
    bytes (never an exception: the card is inside the data)."""
    return read_card(path)[0]


def read_card(path: Path) -> tuple[str | None, str | None]:
    """(front matter, problem) of the dataset card ``path`` (a ``README.md``): :func:`card_of` its first
    :data:`MAX_README_BYTES` bytes; (None, None) when the file is absent, not a regular file or
    unreadable (never an exception: the card is inside the data)."""
    p = Path(path)
    try:
        if not p.is_file():
            return None, None
        with open(p, "rb") as f:
            raw = f.read(MAX_README_BYTES + 1)
    except (OSError, ValueError):
        return None, None
    return card_of(raw)


def card_of(raw: bytes) -> tuple[str | None, str | None]:
    """(front matter, problem) of a dataset card's first bytes ``raw`` (:data:`MAX_README_BYTES` + 1 of
    them read: one more than the bound tells a card that goes on): the front matter
    (:func:`front_of`) when ``DatasetCard.load`` reads the card, else (None, why it raises:
    :func:`card_text_problem`)."""
    problem = card_text_problem(raw[:MAX_README_BYTES], complete=len(raw) <= MAX_README_BYTES)
    if problem is not None:
        return None, problem
    return front_of(raw), None


def card_text_problem(raw: bytes, complete: bool = True) -> str | None:
    """Why (a sentence naming the card, the first bad byte and the fix) ``huggingface_hub``'s ``DatasetCard.load`` raises ``UnicodeDecodeError`` on a card of these
    bytes (it reads the whole file as ``utf-8-sig``; ``datasets.load_dataset`` of a folder loads its
    ``README.md`` so, and fails with it), or None when they are UTF-8 (a leading UTF-8 byte order mark
    allowed). ``complete``: ``raw`` is the whole card (False: its first bytes; a character cut at their
    end is no problem). A UTF-16 or UTF-32 card (a Windows editor's "Unicode" save) is named by its
    byte order mark, with the ``iconv`` call that re-encodes it."""
    fails = "load_dataset of its folder raises UnicodeDecodeError reading it"
    bom = wide_bom(raw)
    if bom is not None:
        mark, name = bom
        return (f"the dataset card {CARD_NAME} is {name} text (byte order mark {mark.hex(' ')}), not UTF-8: {fails}; "
                    f"re-encode it: iconv -f {name} -t UTF-8 {CARD_NAME}")
    try:
        codecs.getincrementaldecoder("utf-8")().decode(raw, final=complete)
    except UnicodeDecodeError as exc:
        return (f"the dataset card {CARD_NAME} is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}): "
                f"{fails}; re-encode it as UTF-8")
    return None


#: ``huggingface_hub.repocard.REGEX_YAML_BLOCK`` (how ``DatasetCard.load`` finds the front matter):
#: optional blank space, ``---`` and a line end, the YAML (the shortest), a line end, ``---``, optional
#: spaces or tabs, a line end or the end
_FRONT = re.compile(rb"^(\s*---(?:\r\n|\r|\n))([\S\s]*?)((?:\r\n|\r|\n)---[ \t]*(\r\n|\n|$))")
#: the UTF-8 byte order mark ``DatasetCard.load`` reads past (``encoding="utf-8-sig"``)
_BOM = b"\xef\xbb\xbf"


def front_of(raw: bytes) -> str | None:
    """The YAML front matter of a dataset card's bytes (at most :data:`MAX_README_BYTES` of them: a
    card whose front matter closes within them is read whatever the length of its body), as
    ``huggingface_hub``'s ``DatasetCard.load`` finds it (:data:`_FRONT`, a leading byte order mark
    skipped); None when there is none or it is not UTF-8 (``DatasetCard.load`` raises on those bytes)."""
    raw = raw[:MAX_README_BYTES]
    if raw.startswith(_BOM):
        raw = raw[len(_BOM):]
    m = _FRONT.search(raw)
    if m is None:
        return None
    try:
        return m.group(2).decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse_front(front: str) -> dict[str, Any] | None:
    """A card's front matter (:func:`card_front_text`) parsed as YAML (PyYAML's safe loader): its
    mapping (an empty one when the YAML is no mapping: it declares nothing), or None when it does
    not parse or uses YAML aliases (never written by the Hub; refused rather than expanded)."""
    import yaml  # lazily: only a folder holding a dataset card pays for it

    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(front, Loader=yaml.SafeLoader)):
            return None
        meta = yaml.safe_load(front)
    except (yaml.YAMLError, ValueError, OverflowError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else {}


def readme_features(path: Path) -> list[tuple[str | None, dict[str, Any]]] | None:
    """The features a dataset card's YAML front matter declares, per config: ``[(config_name or None,
    {column: feature})]``, each feature in the JSON form :func:`class_label_names` reads (a
    ``class_label`` becomes ``{"names": [...], "_type": "ClassLabel"}``; other dtypes are kept as given);
    a feature written with ``sequence:`` (or ``list:``) instead of ``dtype:`` (token tags:
    ``sequence: {class_label: {names: ...}}``) becomes ``{"feature": <its item>, "_type": "Sequence"}``,
    as :func:`tag_label_names` reads it.

    The card (``path``, a ``README.md``) opens with ``---``, its YAML, and ``---``; ``dataset_info`` is
    one mapping or a list of them (one per config), each with ``features: [{name, dtype}]`` where a
    class label's dtype is ``{"class_label": {"names": {"0": "neg", "1": "pos"}}}`` (keys the indices
    0..n-1, as ``datasets`` writes them). None when the file is absent, not a regular file, over
    :data:`MAX_README_BYTES`, has no front matter, uses YAML aliases (never written by the Hub; refused
    rather than expanded) or does not parse: the card is inside the data, never an exception.
    """
    front = card_front_text(path)
    return None if front is None else front_features(front)


def front_features(front: str) -> list[tuple[str | None, dict[str, Any]]] | None:
    """:func:`readme_features` of a card's front matter (:func:`card_front_text`, :func:`front_of`)."""
    if "class_label" not in front:  # the only dtype read here: a card without one is not parsed
        return []
    meta = parse_front(front)
    if meta is None:
        return None
    info = meta.get("dataset_info")
    configs = info if isinstance(info, list) else [info] if isinstance(info, dict) else []
    out: list[tuple[str | None, dict[str, Any]]] = []
    for conf in configs:
        if not isinstance(conf, dict) or not isinstance(conf.get("features"), list):
            continue
        name = conf.get("config_name") if isinstance(conf.get("config_name"), str) else None
        feats: dict[str, Any] = {}
        for feat in conf["features"]:
            if isinstance(feat, dict) and isinstance(feat.get("name"), str):
                seq = next((k for k in ("sequence", "list") if k in feat), None)
                feats[feat["name"]] = (_card_feature(feat.get("dtype")) if seq is None
                                       else {"feature": _card_feature(feat[seq]), "_type": "Sequence"})
        out.append((name, feats))
    return out


def _card_feature(dtype: Any) -> Any:
    """A card's ``dtype`` in ``dataset_info.json``'s form where it is a ``class_label`` whose names
    are keyed by exactly the indices 0..n-1 (as strings or ints); anything else as given."""
    cl = dtype.get("class_label") if isinstance(dtype, dict) else None
    names = cl.get("names") if isinstance(cl, dict) else None
    if not isinstance(names, dict):
        return dtype
    keys = {str(k) for k in names}
    if keys != {str(i) for i in range(len(names))}:
        return dtype
    by_index = {str(k): v for k, v in names.items()}
    return {"names": [by_index[str(i)] for i in range(len(names))], "_type": "ClassLabel"}
