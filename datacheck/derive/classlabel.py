"""The classes a Hugging Face dataset declares for its label column (``ClassLabel(names=[...])``),
taken as ``[labels] classes`` (so ``len(names)`` classes) when the config gives no class domain.

``datasets`` stores a ``ClassLabel`` column as int64 class indices and declares the names in the
data's own metadata: in every parquet and arrow file it writes (the schema metadata key
``huggingface``: ``{"info": {"features": {...}}}``) and in a ``save_to_disk`` split's
``dataset_info.json``; a Hub dataset repository's card (``README.md`` at the repository's root: the
audited folder or one above it, :func:`datacheck.io.cardpath.card_path`) declares
them in its YAML front matter (``dataset_info: features:``, ``dtype: class_label: names:``), which
``load_dataset`` casts the files to. A training script builds its head from ``len(names)``
(``features["label"].num_classes``), so ``labels.out_of_range`` and ``labels.unseen_class`` check
against that count, as if ``[labels] classes = names`` had been written (integer labels index into
the names; a column holding the names themselves is checked against them). The label column is
``[columns] label`` when set, else ``label``, else ``labels`` (the role's inferred names). When it
declares none, a token classification dataset's tags declared as ``Sequence(ClassLabel(names=[...]))``
(CoNLL-2003's ``ner_tags``) give the classes instead: they bound the tag ids of a
``token_classification`` shard (:func:`_with_declared_tags`).

Read before any shard is (:func:`with_declared_classes`), by ``audit`` (a part too), ``inspect``,
``clean``, ``trace`` and ``datacheck.data_config`` (a :class:`datacheck.torch.BatchGuard`'s facts): the parquet footer of each
parquet shard, the ``dataset_info.json`` of each arrow shard's folder, else (a bare ``.arrow`` file)
the arrow file's own schema metadata; shards in an object store alike, through fsspec (the footer,
the ``dataset_info.json`` object beside them); the card of the audited folder or of a folder above it
(:func:`datacheck.io.cardpath.card_path`); in an object store, the card at the audited prefix
(:func:`datacheck.io.cardsplits.store_card_front`; one above it is not looked for).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from datacheck.io.cardpath import card_path
from datacheck.io.cardsplits import store_card_front
from datacheck.io.discover import DiscoveredShard, Discovery
from datacheck.io.hfmeta import (
    INFO_NAME,
    MAX_FEATURES_BYTES,
    README_NAME,
    class_label_names,
    features_of_info_json,
    features_of_schema_metadata,
    front_features,
    is_list_feature,
    read_info_features,
    readme_features,
    tag_label_names,
)
from datacheck.io.stores import filesystem
from datacheck.model.config import Config
from datacheck.model.roles import TAG_NAMES

__all__ = ["DeclaredSource", "as_declared", "declared_features", "declared_source", "source_schema",
           "with_declared_classes"]

#: the candidate label column names, in order, when ``[columns] label`` is unset (the ``label`` role's
#: inferred names, :data:`datacheck.model.roles.ROLE_TABLE`)
LABEL_NAMES = ("label", "labels")


def declared_features(shard: DiscoveredShard, info_cache: dict[Any, Any] | None = None) -> tuple[Any, str] | None:
    """(the ``features`` object ``shard`` declares, where it was read) or None: a parquet shard's
    ``huggingface`` schema metadata (its footer only), an arrow shard's folder's ``dataset_info.json``.
    A shard in an object store, of another format, or whose metadata cannot be read gives None
    (the shard's own checks report an unreadable file)."""
    if info_cache is not None:
        key = ("shard", shard.rel)
        if key not in info_cache:
            info_cache[key] = _declared_features(shard, info_cache)
        return info_cache[key]
    return _declared_features(shard, None)


def _declared_features(shard: DiscoveredShard, info_cache: dict[Any, Any] | None) -> tuple[Any, str] | None:
    """:func:`declared_features` of one shard, local or in an object store (the same bytes read through
    fsspec: a parquet footer, a ``dataset_info.json`` object beside an arrow shard, an arrow file's
    schema); None when nothing is declared or the bytes cannot be read."""
    try:
        if shard.format == "parquet":
            meta = _with_source(shard, lambda f: pq.read_schema(f).metadata)
            feats = features_of_schema_metadata(meta)
            return (feats, f"{shard.rel} (its huggingface schema metadata)") if feats is not None else None
        if shard.format != "arrow":
            return None
        folder: Any = shard.url.rpartition("/")[0] if shard.url is not None else shard.path.parent
        if info_cache is not None and ("info", folder) in info_cache:
            feats = info_cache[("info", folder)]
        else:
            feats = _store_info_features(folder) if shard.url is not None else read_info_features(folder)
            if info_cache is not None:
                info_cache[("info", folder)] = feats
        if feats is not None:
            rel_folder = shard.rel.rpartition("/")[0]
            return feats, (f"{rel_folder}/{INFO_NAME}" if rel_folder else INFO_NAME)
        # a bare .arrow file (no save_to_disk split around it): datasets writes the features into
        # every arrow file's schema metadata too (Dataset.from_dict(...)._data, its cache files)
        feats = features_of_schema_metadata(_with_source(shard, _arrow_schema_metadata))
        return (feats, f"{shard.rel} (its huggingface schema metadata)") if feats is not None else None
    except (OSError, ValueError, pa.ArrowException):  # any pyarrow error (ArrowInvalid is a ValueError,
        return None  # ArrowNotImplementedError a NotImplementedError: a spoiled footer's 128-bit integer): the shard's own read reports it


def source_schema(shard: DiscoveredShard) -> pa.Schema | None:
    """The Arrow schema a parquet or Arrow shard's file declares (its field types and its schema
    metadata: ``datasets``' ``huggingface`` features, a writer's own keys), read from the parquet
    footer or the IPC schema message only, local or in an object store; None for another format or
    when it cannot be read (the shard's own read reports that). ``inspect --export`` gives the exported
    rows these types and metadata, so the export replays as the shard reads."""
    try:
        if shard.format == "parquet":
            return _with_source(shard, pq.read_schema)
        if shard.format == "arrow":
            return _with_source(shard, _arrow_schema)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return None


def _with_source(shard: DiscoveredShard, read: Any) -> Any:
    """``read(f)`` on the shard's bytes opened as a binary file: the local file, or the object of a
    shard in a store through its fsspec filesystem (:func:`datacheck.io.stores.filesystem`)."""
    if shard.url is None:
        with open(shard.path, "rb") as f:
            return read(f)
    fs, path = filesystem(shard.url)
    with fs.open(path, "rb") as f:
        return read(f)


def _arrow_schema_metadata(f: Any) -> Any:
    """The schema metadata of an Arrow IPC file (or, that failing, an IPC stream: ``save_to_disk``'s
    form) read from the binary file ``f``: the schema message only, no record batch."""
    return _arrow_schema(f).metadata


def _arrow_schema(f: Any) -> pa.Schema:
    """The schema of an Arrow IPC file (or, that failing, an IPC stream) read from the binary file
    ``f``: the schema message only, no record batch."""
    try:
        return pa.ipc.open_file(f).schema
    except (OSError, ValueError, pa.ArrowException):
        f.seek(0)
        return pa.ipc.open_stream(f).schema


def _store_info_features(folder_url: str) -> Any:
    """The ``features`` of the ``dataset_info.json`` object in the store folder ``folder_url`` (a
    ``save_to_disk`` split uploaded as it is), or None: absent, larger than
    :data:`~datacheck.io.hfmeta.MAX_FEATURES_BYTES`, or not that JSON."""
    fs, path = filesystem(f"{folder_url}/{INFO_NAME}")
    try:
        if fs.size(path) > MAX_FEATURES_BYTES:
            return None
        raw = fs.cat_file(path)
    except (OSError, ValueError):
        return None
    return features_of_info_json(raw)


def _card(disc: Discovery) -> tuple[list[tuple[str | None, dict[str, Any]]] | None, str]:
    """(the features the dataset card of the audited folder declares per config, or None; its name as
    messages say it: ``README.md`` at the audited root, else its path from there, ``../README.md``).
    The card: :func:`datacheck.io.cardpath.card_path` (the audited folder, or a folder above it up
    to a repository's root: the Hub keeps the card at the root and the shards in ``data/``); for
    shards in an object store, the card at the audited prefix when its listing holds one
    (:func:`datacheck.io.cardsplits.store_card_front`)."""
    if disc.url_root is not None:
        front = store_card_front(disc.url_root) if README_NAME in disc.ignored else None
        return (front_features(front) if front is not None else None), README_NAME
    path = card_path(disc.root)
    if path is None:
        return None, README_NAME
    return readme_features(Path(path)), Path(os.path.relpath(path, os.path.abspath(disc.root))).as_posix()


def with_declared_classes(cfg: Config, disc: Discovery) -> Config:
    """``cfg`` with the classes the data declares: ``[labels] classes`` from the label column's
    ``ClassLabel`` (or the token labels' ``Sequence(ClassLabel)``, :func:`_with_label_classes`), and
    ``[labels] tag_classes`` from every token tag column declared as ``Sequence(ClassLabel)``
    (:func:`_with_tag_columns`: CoNLL-2003's ``pos_tags``, ``chunk_tags`` and ``ner_tags``, each
    bounding its own column). The one entry point of the audit, ``inspect``, ``clean``, ``trace``
    and ``datacheck.data_config`` (the facts of a :class:`datacheck.torch.BatchGuard`)."""
    info_cache: dict[Any, Any] = {}
    return _with_tag_columns(_with_label_classes(cfg, disc, info_cache), disc, info_cache)


def _with_label_classes(cfg: Config, disc: Discovery, info_cache: dict[Any, Any]) -> Config:
    """``cfg`` with ``[labels] classes`` = the names the shards' ``ClassLabel`` declaration of the
    label column gives (their count the class count), when ``[labels]`` sets neither ``num_classes`` nor
    ``classes`` (:meth:`Config.with_declared_classes`: the config's value wins, a different count is
    a note in the report's ``label_facts``). Every shard that declares the column as a ``ClassLabel``
    must declare the same names; when they differ nothing is taken and the note names two of them.
    Shards that declare nothing (another format, no metadata) do not count. The dataset card
    (:func:`_card`: at the audited root, or above it up to the repository's root,
    :func:`datacheck.io.hfmeta.readme_features`) is one more declaration, which must
    agree with the shards'; a card whose configs declare different names gives none (a note).
    When nothing declares a ``ClassLabel`` for the (scalar) label column, the token tags' declaration
    is taken instead (:func:`_with_declared_tags`); ``cfg`` unchanged when there is none either."""
    columns = (cfg.columns.label,) if cfg.columns.label is not None else LABEL_NAMES
    found: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for shard in disc.shards:
        got = declared_features(shard, info_cache)
        if got is None:
            continue
        feats, where = got
        col = next((c for c in columns if class_label_names(feats, c) is not None), None)
        if col is None:
            continue
        names = class_label_names(feats, col)
        assert names is not None
        decl = found.setdefault(col, [])
        if not decl or decl[-1] != (names, where):
            decl.append((names, where))
    card, card_name = _card(disc)
    card_note: dict[str, str] = {}
    for c in columns:
        per_config = [(conf, n) for conf, feats in (card or []) if (n := class_label_names(feats, c)) is not None]
        if not per_config:
            continue
        if len({n for _, n in per_config}) == 1:
            found.setdefault(c, []).insert(0, (per_config[0][1], f"{card_name} (its dataset_info features)"))
        else:
            card_note[c] = (f"{card_name} declares {c!r} as ClassLabel with different names per config ("
                            + ", ".join(f"{conf}: {len(n)}" for conf, n in per_config[:5])
                            + "): no [labels] classes were taken from it; set [labels] num_classes (or classes)")
        break
    col = next((c for c in columns if c in found or c in card_note), None)
    if col is None:
        return _with_declared_tags(cfg, disc, info_cache)
    if col in card_note:
        return cfg.with_declared_classes(col, None, card_name, note=card_note[col])
    decl = found[col]
    first_names, first_where = decl[0]
    other = next(((n, w) for n, w in decl if n != first_names), None)
    if other is not None:
        note = (f"the data declares {col!r} as ClassLabel with different names ({first_where}: {len(first_names)} "
                f"{list(first_names[:5])}, {other[1]}: {len(other[0])} {list(other[0][:5])}): no [labels] classes "
                "were taken from them; set [labels] num_classes (or classes) to the model's class count")
        return cfg.with_declared_classes(col, None, first_where, note=note)
    return cfg.with_declared_classes(col, first_names, first_where)


def _token_label_column(cfg: Config, feats: dict[str, Any]) -> str | None:
    """The column of ``feats`` (one shard's declared features: every column it has) that
    :func:`datacheck.model.roles.resolve_roles` takes as the token ``labels`` role: ``[columns] labels``,
    else ``labels`` when it is a list, else the first of :data:`~datacheck.model.roles.TAG_NAMES`.
    None when there is none, or when the shard has a scalar class label (``[columns] label``, ``label``,
    a scalar ``labels``): the tag names would then be taken as that label's classes."""
    if cfg.columns.labels is not None:
        return cfg.columns.labels if cfg.columns.labels in feats else None
    if cfg.columns.label is not None or "label" in feats:
        return None
    if "labels" in feats:
        return "labels" if is_list_feature(feats["labels"]) else None
    return next((c for c in TAG_NAMES if c in feats), None)


def _declared_tags(cfg: Config, feats: Any) -> tuple[str, tuple[str, ...], str] | None:
    """(the token labels column, the tag names bounding it, which column declares them) from one
    shard's (or one card config's) features: the labels column's own ``Sequence(ClassLabel)``, else,
    for a ``labels`` column ``tokenize_and_align_labels`` made (declared as plain integers), the one
    tag column of :data:`~datacheck.model.roles.TAG_NAMES` declared as ``Sequence(ClassLabel)`` beside
    it (its tags were aligned from it; with two or more such tag columns which one is unknown: None)."""
    if not isinstance(feats, dict):
        return None
    col = _token_label_column(cfg, feats)
    if col is None:
        return None
    names = tag_label_names(feats, col)
    if names is not None:
        return col, names, col
    if col != "labels" or cfg.columns.labels is not None:
        return None
    tagged = [(c, n) for c in TAG_NAMES if (n := tag_label_names(feats, c)) is not None]
    return (col, tagged[0][1], tagged[0][0]) if len(tagged) == 1 else None


def _with_declared_tags(cfg: Config, disc: Discovery, info_cache: dict[Any, Any]) -> Config:
    """``cfg`` with ``[labels] classes`` = the tag names a token classification dataset declares for
    its token labels as ``Sequence(ClassLabel(names=[...]))`` (CoNLL-2003's ``ner_tags``), under the
    rules of :func:`with_declared_classes` (the config's value wins; the shards and the card must
    agree). In a ``token_classification`` shard the labels are tag ids, so ``len(names)`` bounds them
    (:meth:`Config.token_label_bound`): a tag id >= ``len(names)`` other than ``ignore_index`` is
    ``labels.out_of_range`` (CrossEntropyLoss' device-side assert on a GPU). In the other layouts
    token labels are token ids and ``classes`` does not bound them."""
    found: list[tuple[str, tuple[str, ...], str]] = []
    for shard in disc.shards:
        got = declared_features(shard, info_cache)
        if got is None:
            continue
        feats, where = got
        tags = _declared_tags(cfg, feats)
        if tags is None:
            continue
        col, names, by = tags
        how = f"{where}: {by!r} as Sequence(ClassLabel)" + ("" if by == col else f", the tags {col!r} was aligned from")
        if not found or found[-1][:2] != (col, names):
            found.append((col, names, how))
    card, card_name = _card(disc)
    per_config = [t for _, feats in (card or []) if (t := _declared_tags(cfg, feats)) is not None]
    if per_config:
        col, names, by = per_config[0]
        how = f"{card_name} (its dataset_info features): {by!r} as Sequence(ClassLabel)"
        if len({(c, n) for c, n, _ in per_config}) == 1:
            found.insert(0, (col, names, how))
        else:
            note = (f"{card_name} declares the token tags as Sequence(ClassLabel) with different names per config: "
                    "no [labels] classes were taken from it; set [labels] num_classes (or classes)")
            return cfg.with_declared_classes(col, None, card_name, note=note)
    if not found:
        return cfg
    col, names, how = found[0]
    other = next((f for f in found if f[:2] != (col, names)), None)
    if other is not None:
        note = (f"the data declares its token tags as Sequence(ClassLabel) with different names ({how}: {len(names)} "
                f"{list(names[:5])}, {other[2]}: {len(other[1])} {list(other[1][:5])}): no [labels] classes were "
                "taken from them; set [labels] num_classes (or classes) to the model's tag count")
        return cfg.with_declared_classes(col, None, how, note=note)
    return cfg.with_declared_classes(col, names, how, tags=True)


def _tag_columns(feats: Any) -> dict[str, tuple[str, ...]]:
    """Every column of one shard's (or one card config's) features declared as
    ``Sequence(ClassLabel(names))``: column -> names."""
    if not isinstance(feats, dict):
        return {}
    return {c: n for c in feats if isinstance(c, str) and (n := tag_label_names(feats, c)) is not None}


def _with_tag_columns(cfg: Config, disc: Discovery, info_cache: dict[Any, Any]) -> Config:
    """``cfg`` with ``[labels] tag_classes`` filled with the names of every token tag column the
    shards (and the card at the audited root) declare as ``Sequence(ClassLabel(names=[...]))``, for
    the columns the config does not give (:meth:`Config.with_declared_tag_classes`). A CoNLL-2003
    split declares three: ``pos_tags`` (47 names), ``chunk_tags`` (23), ``ner_tags`` (9); each
    bounds its own column's ids (``labels.out_of_range``) and names its classes never seen
    (``labels.unseen_class``), whichever column the token ``labels`` role is. Every declaration of a
    column must give the same names; when two differ the column is left out and a note says so.
    With a ``labels`` column beside two or more declared tag columns, which one it was aligned from
    is unknown: no ``[labels] classes`` are taken (no names, no unseen classes), but the largest
    set's number of names bounds it (a label past every declared set is out of range whichever it
    came from), and a note says so."""
    found: dict[str, list[tuple[tuple[str, ...], str]]] = {}

    def add(decl: dict[str, tuple[str, ...]], where: str) -> None:
        for col, names in decl.items():
            seen = found.setdefault(col, [])
            if not any(n == names for n, _ in seen):
                seen.append((names, where))

    if disc.url_root is None:
        card = readme_features(disc.root / README_NAME)
    else:
        front = store_card_front(disc.url_root) if README_NAME in disc.ignored else None
        card = front_features(front) if front is not None else None
    for _, feats in card or []:
        add(_tag_columns(feats), f"{README_NAME} (its dataset_info features)")
    for shard in disc.shards:
        got = declared_features(shard, info_cache)
        if got is not None:
            add(_tag_columns(got[0]), got[1])
    declared: dict[str, tuple[tuple[str, ...], str]] = {}
    notes: list[str] = []
    for col, decl in found.items():
        if len(decl) == 1:
            declared[col] = decl[0]
            continue
        (a, wa), (b, wb) = decl[0], decl[1]
        notes.append(f"the data declares {col!r} as Sequence(ClassLabel) with different names ({wa}: {len(a)} "
                     f"{list(a[:5])}, {wb}: {len(b)} {list(b[:5])}): no tag names were taken for it; set "
                     f"[labels] tag_classes.{col}")
    ceiling = None
    tagged = [c for c in TAG_NAMES if c in declared]
    if (cfg.labels.classes is None and cfg.labels.num_classes is None and cfg.columns.labels is None
            and "labels" not in declared and len(tagged) >= 2
            and any("labels" in feats for feats in _all_features(disc, info_cache))):
        top = max(tagged, key=lambda c: len(declared[c][0]))
        k = len(declared[top][0])
        ceiling = (k, f"the number of names of the largest declared tag set {top!r}")
        notes.append("a 'labels' column beside " + ", ".join(repr(c) for c in tagged)
                     + " declared as Sequence(ClassLabel): which one its tags were aligned from is unknown, so "
                     f"'labels' is bounded only by the largest set, {top!r} ({k} names: a label >= {k} is past "
                     "every declared set); each tag column is bounded by its own. Set [labels] classes (or "
                     "num_classes) to the head's tag set to bound 'labels' exactly")
    return cfg.with_declared_tag_classes(declared, notes, ceiling)


def _all_features(disc: Discovery, info_cache: dict[Any, Any]) -> list[dict[str, Any]]:
    """The declared features of every shard that has some (cached reads: :func:`declared_features`)."""
    out = []
    for shard in disc.shards:
        got = declared_features(shard, info_cache)
        if got is not None and isinstance(got[0], dict):
            out.append(got[0])
    return out


#: What a shard's file declares, for an export of its rows (:func:`declared_source`): its Arrow schema
#: (or None), the ``datasets`` features it declares (or None), and the columns the audit reads clipped
#: to Int64 (wider than 64 bits: exported as read).
DeclaredSource = tuple[pa.Schema | None, Any, tuple[str, ...]]


def declared_source(shard: DiscoveredShard, clipped: tuple[str, ...] | list[str] = ()) -> DeclaredSource:
    """:data:`DeclaredSource` of ``shard`` (:func:`source_schema`, :func:`declared_features`); ``clipped``:
    ``CheckInput.clipped`` of its read."""
    feats = declared_features(shard)
    return source_schema(shard), feats[0] if feats is not None else None, tuple(clipped)


def as_declared(df: Any, sources: list[DeclaredSource]) -> pa.Table | None:
    """``df`` (a polars frame of exported rows: data columns and ``_datacheck_*`` columns) as a
    ``pyarrow.Table`` with what the shards' files declare, or None when no shard declares anything
    (JSONL, CSV, ...: the caller writes polars' own parquet). ``inspect --export`` and ``plan --export``
    write it, so the export audited alone reads as its shards do.

    A data column takes the type the shards' schemas agree on (cast safely: a value that does not fit
    keeps polars' type; a clipped column keeps it too, as the audit judged it); the ``_datacheck_*``
    columns keep theirs. The schema metadata keys the schemas agree on are kept (but ``pandas``, which
    describes the source's own frame and index), and ``huggingface`` is made of the declared features
    when no schema holds it and every shard declares the same."""
    schemas = [s for s, _, _ in sources if s is not None]
    declared = [f for _, f, _ in sources]
    if not schemas and all(f is None for f in declared):
        return None
    clipped = {c for _, _, cs in sources for c in cs}
    types: dict[str, pa.DataType | None] = {}
    for sch in schemas:
        for fld in sch:
            types[fld.name] = fld.type if types.get(fld.name, fld.type) == fld.type else None
    table = df.to_arrow()
    cols = []
    for name, col in zip(table.column_names, table.columns):
        want = types.get(name) if not name.startswith("_datacheck_") and name not in clipped else None
        if want is not None and want != col.type:
            try:
                col = col.cast(want)
            except (pa.ArrowException, ValueError, NotImplementedError):
                pass  # a value the declared type cannot hold: exported as read
        cols.append(col)
    metas = [dict(s.metadata or {}) for s in schemas]
    meta = ({k: v for k, v in metas[0].items() if k != b"pandas" and all(m.get(k) == v for m in metas[1:])}
            if metas else {})
    if b"huggingface" not in meta and declared[0] is not None and all(f == declared[0] for f in declared):
        meta[b"huggingface"] = json.dumps({"info": {"features": declared[0]}}).encode()
    return pa.Table.from_arrays(cols, names=table.column_names).replace_schema_metadata(meta or None)
