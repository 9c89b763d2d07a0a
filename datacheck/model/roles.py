"""Column roles: given in ``[columns]`` or inferred from Hugging Face column names.

Inference (CHECKS.md "Roles and facts"): string columns ``text``/``sentence``/``content`` (and the
GLUE pair columns ``sentence1``/``sentence2``) are text; a scalar ``label`` of integer, string,
categorical or boolean dtype is the class label (a float ``label`` is a regression ``target``, unless
``[labels] num_classes`` or ``classes`` is set: then it is the class label); with no class label, a
float ``target``/``targets``/``score``/``y`` column is the ``target`` too (:data:`TARGET_NAMES`, the
names the layout recognizer calls a shard ``regression`` by), and with no ``label``/``labels`` column
an integer or Boolean ``target``/``targets``/``y`` is the class label (:data:`CLASS_TARGET_NAMES`); a
list-typed ``labels`` is token labels (a scalar ``labels`` is a class label); ``input_ids``,
``attention_mask`` and ``token_type_ids`` as named (list-typed); preference pairs ``chosen``/``rejected``
(also LLaMA-Factory's ``*_messages`` and TRL's tokenized ``chosen_input_ids``/``rejected_input_ids``,
integer lists); Hugging Face token classification:
a list-of-strings ``tokens`` is text, ``ner_tags``/``pos_tags``/``chunk_tags`` (integer lists) are
token labels aligned with ``tokens``. Roles given in the config are
never replaced by inference; a role column the config names but the shard lacks is reported as
``schema.missing_column``; a role column whose dtype cannot serve the role (:func:`role_dtype_problems`)
is reported as ``schema.dtype`` by :mod:`datacheck.checks.roledtype`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass, replace
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from datacheck.model.config import ColumnsSection

__all__ = ["Roles", "RoleSpec", "ROLE_TABLE", "ROLE_SPECS", "resolve_roles", "null_role_casts", "text_column_names", "row_content", "content_gap", "CONTEXT_COLUMNS", "AUDIO_COLUMNS", "OWN_CONTENT_ROLES", "KEY_COLUMNS", "is_list", "inner_dtype", "ROLE_NAMES",
           "TEXT_NAMES", "text_casts", "RoleDtypeProblem", "role_dtype_problems", "role_problem", "list_depth",
           "stand_in_column", "stand_in_message",
           "DECODER_COLUMNS", "TAG_NAMES", "WORDS_NAME", "seq2seq_layout",
           "MESSAGE_ROLE_FIELDS", "MESSAGE_CONTENT_FIELDS", "MESSAGE_PART_TEXT_FIELDS", "CHAT_ROLE_NAMES",
           "MessageFields", "message_fields", "narrows_wide_int", "wide_int_casts", "decimal_casts",
           "cast_expr", "INT64_MIN", "INT64_MAX", "TOKEN_ID_SUFFIX", "token_id_columns", "TARGET_NAMES",
           "CLASS_TARGET_NAMES", "float_vector_labels"]

@dataclass(frozen=True)
class RoleSpec:
    """One row of the role table: everything datacheck knows about a role.

    Attributes:
        name: the role (``[columns]`` key and :class:`Roles` attribute).
        arity: ``"one"`` (a column or None), ``"many"`` (a tuple of columns) or ``"groups"``
            (a tuple of column tuples, e.g. ``aligned``).
        dtype: the dtype rule of :func:`role_dtype_problems`: ``"int_list"`` (one list level of
            integers), ``"mask_list"`` (one list level of integers, booleans or floats),
            ``"text"`` (String or a list of String), ``"numeric"`` (numbers or lists of numbers),
            ``"messages"`` (:func:`message_fields`),
            ``"class_label"`` (a scalar; rules depend on ``[labels]``) or None (no rule).
        null_as: the dtype an all-null column (dtype ``Null``) of the role is read as, or None.
        infer: column names inferred as this role (Hugging Face names) when ``[columns]`` omits it.
            ``input_ids``-like roles are inferred by name whatever their dtype; text only when String.
        aligned: its list must have the length of ``input_ids`` in each row (``length.mismatch``).
        content: part of a row's content (``dup.*``).
        missing_reason: what a check needing the role says when the shard has no such column.
    """

    name: str
    arity: str
    dtype: str | None
    null_as: pl.DataType | None
    infer: tuple[str, ...]
    aligned: bool
    content: bool
    missing_reason: str


def _missing(role: str, what: str | None = None) -> str:
    return f"no {what or role} column (set [columns] {role})"


_LIST_INT = pl.List(pl.Int64)
#: The role table: one row per role, in the order roles are listed (``Roles.columns``, ``to_dict``).
ROLE_TABLE: tuple[RoleSpec, ...] = (
    # `txt` (and a gzipped member's `txt.gz`/`text.gz`): a WebDataset sample's text member, the column
    # Hugging Face's webdataset loader and formats/webdataset.py name by the member's extension
    RoleSpec("text", "many", "text", pl.String(), ("text", "sentence", "content", "sentence1", "sentence2", "txt",
                                                    "txt.gz", "text.gz"),
             False, True, _missing("text")),
    RoleSpec("label", "one", "class_label", pl.Int64(), ("label", "labels"), False, True,
             _missing("label", "class label")),
    RoleSpec("target", "many", "numeric", pl.Float64(), (), False, True, _missing("target")),
    RoleSpec("features", "many", "numeric", pl.Float64(), (), False, True, _missing("features")),
    RoleSpec("input_ids", "one", "int_list", _LIST_INT, ("input_ids",), True, True, _missing("input_ids")),
    RoleSpec("attention_mask", "one", "mask_list", _LIST_INT, ("attention_mask",), True, True,
             _missing("attention_mask")),
    RoleSpec("labels", "one", "int_list", _LIST_INT, ("labels",), True, True, _missing("labels", "token labels")),
    RoleSpec("token_type_ids", "one", "int_list", _LIST_INT, ("token_type_ids",), True, True,
             _missing("token_type_ids")),
    RoleSpec("aligned", "groups", None, None, (), False, True, "no aligned groups (set [columns] aligned)"),
    # fine-tuning, packed and preference data (CHECKS.md "roles added for fine-tuning and packed data")
    RoleSpec("messages", "one", "messages", None, ("messages", "conversations"), False, True,
             _missing("messages", "messages (conversation)")),
    # `assistant_masks`: the name transformers' apply_chat_template(return_assistant_tokens_mask=True)
    # returns and TRL's SFTTrainer stores (assistant_only_loss)
    RoleSpec("assistant_mask", "one", "mask_list", _LIST_INT, ("assistant_mask", "assistant_masks"), True, True,
             _missing("assistant_mask")),
    RoleSpec("position_ids", "one", "int_list", _LIST_INT, ("position_ids",), True, True, _missing("position_ids")),
    RoleSpec("document_ids", "one", "int_list", _LIST_INT, ("document_ids",), True, True, _missing("document_ids")),
    RoleSpec("seq_lens", "one", "int_list", _LIST_INT, ("seq_lens",), False, False, _missing("seq_lens")),
    RoleSpec("cu_seqlens", "one", "int_list", _LIST_INT, ("cu_seqlens",), False, False, _missing("cu_seqlens")),
    # LLaMA-Factory's ``*_messages``; TRL's tokenized pairs (``DPOTrainer.tokenize_row``: ``*_input_ids``)
    RoleSpec("chosen", "one", None, None, ("chosen", "chosen_messages", "chosen_input_ids"), False, True,
             _missing("chosen")),
    RoleSpec("rejected", "one", None, None, ("rejected", "rejected_messages", "rejected_input_ids"), False, True,
             _missing("rejected")),
    RoleSpec("input_lengths", "one", "numeric", pl.Int64(), ("input_lengths",), False, True, _missing("input_lengths")),
)
ROLE_SPECS: dict[str, RoleSpec] = {r.name: r for r in ROLE_TABLE}
ROLE_NAMES = tuple(r.name for r in ROLE_TABLE)
#: column names inferred as text (Hugging Face conventions)
TEXT_NAMES = ROLE_SPECS["text"].infer
_TEXT_NAMES = TEXT_NAMES
#: roles inferred by their own name, whatever the dtype (list-typed token roles; ``labels`` has its own rule)
_NAMED_ROLES = tuple(r.name for r in ROLE_TABLE if r.arity == "one" and r.infer[:1] == (r.name,) and r.name not in ("label", "labels"))

#: Chat messages (the ``messages`` role): a list of structs, one per turn. Accepted field names, in
#: the order they are looked for: the speaker (Hugging Face/OpenAI ``role``, ShareGPT ``from``) and
#: the content (``content``, ShareGPT ``value``). Content is a string, or a list of parts
#: ``{type, text}`` (OpenAI) / ``{type, value}`` (LLaMA-Factory v1) whose text field is
#: :data:`MESSAGE_PART_TEXT_FIELDS`.
MESSAGE_ROLE_FIELDS = ("role", "from")
MESSAGE_CONTENT_FIELDS = ("content", "value")
MESSAGE_PART_TEXT_FIELDS = ("text", "value")
#: Speaker names -> the canonical chat role (``system``, ``user``, ``assistant``, ``tool_call``: an
#: assistant turn that calls a tool, ``tool``: a tool result). Sources: Hugging Face chat templates
#: and OpenAI (system, developer, user, assistant, tool, function), ShareGPT as FastChat and
#: LLaMA-Factory write it (human, gpt, system, function_call, observation), Llama 3.1 (ipython).
#: A name not listed is an unknown role (``sft.role_order``).
CHAT_ROLE_NAMES: dict[str, str] = {
    "system": "system", "developer": "system", "user": "user", "human": "user", "assistant": "assistant",
    "gpt": "assistant", "function_call": "tool_call", "tool": "tool", "function": "tool", "observation": "tool",
    "ipython": "tool",
}


@dataclass(frozen=True)
class MessageFields:
    """How one shard stores its ``messages`` (see :func:`message_fields`).

    Attributes:
        role: the struct field naming the speaker (``role`` or ``from``).
        content: the struct field holding the content (``content`` or ``value``).
        parts: True when the content is a list of parts (structs), False when it is a string.
        part_text: the parts' text field (``text`` or ``value``), when ``parts``.
        part_type: True when the parts have a ``type`` field (a part of another type than ``text``,
            e.g. an image, is content even without text).
        tool_calls: the assistant struct's tool-call field (OpenAI ``tool_calls``, legacy
            ``function_call``), or None.
    """

    role: str
    content: str
    parts: bool
    part_text: str | None = None
    part_type: bool = False
    tool_calls: str | None = None


def message_fields(dtype: pl.DataType) -> MessageFields | None:
    """The fields of a ``messages`` column of ``dtype``, or None when the dtype cannot serve the
    role: it must be ``List(Struct)`` with a String speaker field (:data:`MESSAGE_ROLE_FIELDS`) and a
    content field (:data:`MESSAGE_CONTENT_FIELDS`) of String (or all-null) or of a list of structs
    with a String (or all-null) text field (:data:`MESSAGE_PART_TEXT_FIELDS`)."""
    if not isinstance(dtype, pl.List) or not isinstance(dtype.inner, pl.Struct):
        return None
    fields = {f.name: f.dtype for f in dtype.inner.fields}
    role = next((f for f in MESSAGE_ROLE_FIELDS if f in fields), None)
    content = next((f for f in MESSAGE_CONTENT_FIELDS if f in fields and f != role), None)
    if role is None or content is None or fields[role] not in (pl.String, pl.Null):
        return None
    calls = next((f for f in ("tool_calls", "function_call") if f in fields), None)
    ct = fields[content]
    if ct in (pl.String, pl.Null):
        return MessageFields(role, content, False, tool_calls=calls)
    if isinstance(ct, pl.List) and isinstance(ct.inner, pl.Struct):
        pf = {f.name: f.dtype for f in ct.inner.fields}
        text = next((f for f in MESSAGE_PART_TEXT_FIELDS if f in pf and pf[f] in (pl.String, pl.Null)), None)
        if text is not None:
            return MessageFields(role, content, True, text, "type" in pf, calls)
    return None


def _all_null(dtype: pl.DataType) -> bool:
    """A column whose every value is null in this shard: polars infers dtype ``Null`` for it from
    JSON or CSV. It keeps its role (its rows are null, which the role's checks report)."""
    return dtype == pl.Null


def _null_elements(dtype: pl.DataType) -> bool:
    """A list column whose every element is null or every list empty in this shard (JSON ``[]`` or
    ``[null]`` rows only): polars infers ``List(Null)``."""
    return isinstance(dtype, pl.List) and dtype.inner == pl.Null


def _dictionary_text(dtype: pl.DataType) -> bool:
    """Dictionary-encoded text: polars ``Categorical``/``Enum`` (Arrow ``dictionary<string>``,
    pandas ``category``), or one list level of it. Its values are strings; the encoding is storage."""
    if isinstance(dtype, (pl.List, pl.Array)):
        dtype = dtype.inner  # type: ignore[assignment]
    return isinstance(dtype, (pl.Categorical, pl.Enum))


def is_list(dtype: pl.DataType) -> bool:
    return isinstance(dtype, (pl.List, pl.Array))


def inner_dtype(dtype: pl.DataType) -> pl.DataType:
    """The element dtype of a (nested) list/array dtype; the dtype itself for scalars."""
    while isinstance(dtype, (pl.List, pl.Array)):
        dtype = dtype.inner  # type: ignore[assignment]
    return dtype


def _as_tuple(v: str | list[str] | None) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(v)


class _RolesBase:
    """Methods of :class:`Roles` (its fields come from :data:`ROLE_TABLE`)."""

    __slots__ = ()
    inferred: frozenset[str]

    def of(self, role: str) -> tuple[str, ...]:
        """The columns of ``role`` as a flat tuple (empty when the shard has none)."""
        v = getattr(self, role)
        if v is None:
            return ()
        if ROLE_SPECS[role].arity == "groups":
            return tuple(c for g in v for c in g)
        return v if isinstance(v, tuple) else (v,)

    def has(self, role: str) -> bool:
        """Whether the shard has a column of ``role``."""
        return bool(self.of(role))

    def columns(self) -> list[str]:
        """All role columns (the roles marked ``content`` in the table), in table order, without
        repeats (the row content of ``dup.*``)."""
        out: list[str] = []
        for spec in ROLE_TABLE:
            if spec.content:
                for c in self.of(spec.name):
                    if c not in out:
                        out.append(c)
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in ROLE_NAMES:
            v = getattr(self, name)
            if v in (None, ()):
                continue
            cols = [list(g) for g in v] if name == "aligned" else (list(v) if isinstance(v, tuple) else v)
            out[name] = {"columns": cols, "inferred": name in self.inferred}
        return out


def _role_field(spec: RoleSpec) -> tuple[str, str, Any]:
    typ = {"one": "str | None", "many": "tuple[str, ...]", "groups": "tuple[tuple[str, ...], ...]"}[spec.arity]
    return (spec.name, typ, field(default=None if spec.arity == "one" else ()))


if TYPE_CHECKING:
    class Roles(_RolesBase):
        """Static view of the generated class below (type checkers cannot see fields made from a table)."""

        inferred: frozenset[str]
        missing: tuple[tuple[str, str], ...]
        stand_ins: tuple[tuple[str, str, str], ...]
        unavailable: tuple[tuple[str, str], ...]
        derived: tuple[str, ...]

        def __init__(self, **fields: Any) -> None: ...

        def __getattr__(self, role: str) -> Any: ...
else:
    #: Resolved roles of one shard (only columns the shard has): one attribute per row of
    #: :data:`ROLE_TABLE` (``str | None`` for arity one, a tuple for many, a tuple of tuples for groups),
    #: plus ``inferred`` (role names inferred from column names), ``missing`` ((role, column) pairs
    #: the config names but the shard lacks), ``stand_ins`` ((role, declared column, column read)
    #: triples: a declared column the shard lacks, or whose dtype cannot serve the role, replaced by the
    #: role's standard column, :func:`stand_in_column`) and ``unavailable`` ((role, reason) pairs: roles the read
    #: path would have made but could not, e.g. rendering messages without transformers; a check
    #: needing such a role is skipped with that reason) and ``derived`` (columns the read path added:
    #: rendered tokens, the messages of an Alpaca layout; a strict contract does not count them). Frozen.
    Roles = make_dataclass(
        "Roles",
        [_role_field(s) for s in ROLE_TABLE]
        + [("inferred", "frozenset[str]", field(default_factory=frozenset)),
           ("missing", "tuple[tuple[str, str], ...]", field(default=())),
           ("stand_ins", "tuple[tuple[str, str, str], ...]", field(default=())),
           ("unavailable", "tuple[tuple[str, str], ...]", field(default=())),
           ("derived", "tuple[str, ...]", field(default=()))],
        bases=(_RolesBase,), frozen=True,
    )
    Roles.__module__ = __name__
    Roles.__doc__ = "Resolved roles of one shard (only columns the shard has); fields from ROLE_TABLE."


def _class_label_dtype(dtype: pl.DataType) -> bool:
    """Dtypes inferred as a class label: integer (an integral decimal too, :func:`_integral_decimal`),
    string, categorical/enum, boolean (or all-null). A float column is not (its values may be
    regression scores; see :func:`resolve_roles`)."""
    return (dtype.is_integer() or _integral_decimal(dtype) or dtype in (pl.String, pl.Boolean)
            or isinstance(dtype, (pl.Categorical, pl.Enum)) or _all_null(dtype))


#: columns that hold a class label as its name (a string), read as the class label when the shard
#: has no ``label``/``labels`` column: ``label_name`` (dair-ai emotion's released files, realdata #11),
#: ``label_text`` (SetFit's datasets, beside an integer ``label`` that then wins). Other label-like
#: names (``class``, ``category``, ``coarse_label``) are not guessed: they may be metadata or one of
#: several label columns (TREC's ``coarse_label``/``fine_label``); ``[columns] label`` names them
NAME_LABELS = ("label_name", "label_text")


def _class_name_dtype(dtype: pl.DataType) -> bool:
    """Dtypes of a class-name column (:data:`NAME_LABELS`): string or categorical/enum, never numbers
    (a number beside such a name would be an index of unknown base)."""
    return dtype == pl.String or isinstance(dtype, (pl.Categorical, pl.Enum))


#: Hugging Face token-classification label columns (CoNLL-2003, WikiANN, ...), in the order one is
#: taken as the ``labels`` role; all of them align with the word list ``tokens``.
TAG_NAMES = ("ner_tags", "pos_tags", "chunk_tags")
#: the word-list column of Hugging Face token-classification datasets (a list of strings)
WORDS_NAME = "tokens"


def _string_list(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.List) and dtype.inner == pl.String


def _int_list(dtype: pl.DataType) -> bool:
    return isinstance(dtype, pl.List) and dtype.inner.is_integer()


def _mask_list(dtype: pl.DataType) -> bool:
    """One list level of integers, booleans or floats (the ``mask_list`` dtype rule)."""
    return isinstance(dtype, pl.List) and (dtype.inner.is_integer() or dtype.inner == pl.Boolean
                                           or dtype.inner.is_float())


#: float columns taken as a regression target, in this order (a float ``label``/``labels`` first: the
#: class label's name read as the target); the role ``target`` is inferred from them when
#: ``[columns] target`` is unset and no class label is found, and the layout recognizer names the
#: shard ``regression`` by them
TARGET_NAMES = ("label", "labels", "target", "targets", "score", "y")

#: integer or Boolean columns taken as the class label, in this order, when the shard has no
#: ``label``/``labels`` column and the config names no label or target (scikit-learn's ``y``, Kaggle's
#: ``target``: the float ones of these names are the regression target, :data:`TARGET_NAMES`)
CLASS_TARGET_NAMES = ("target", "targets", "y")


def _class_index_dtype(dtype: pl.DataType) -> bool:
    """Dtypes a :data:`CLASS_TARGET_NAMES` column is the class label in: integer (an integral
    decimal too) or Boolean; never a string (``targets`` of text are a seq2seq target) nor a float."""
    return dtype.is_integer() or _integral_decimal(dtype) or dtype == pl.Boolean


#: the name Hugging Face and TRL give a list of token ids other than the model's ``input_ids``: TRL's
#: tokenized pairs ``prompt_input_ids`` / ``chosen_input_ids`` / ``rejected_input_ids``
#: (``DPOTrainer.tokenize_row``), KTO's ``completion_input_ids``, an encoder-decoder's ``decoder_input_ids``
TOKEN_ID_SUFFIX = "_input_ids"


def token_id_columns(roles: "Roles", schema: dict[str, pl.DataType]) -> tuple[str, ...]:
    """Every column of a row that holds token ids an embedding reads, in this order: the ``input_ids``
    role column (whatever its dtype: a dtype that cannot serve is ``schema.dtype``), the ``chosen`` /
    ``rejected`` role columns that are integer lists (TRL's tokenized pairs, or a name set in
    ``[columns]``), then every other column named ``*_input_ids`` (:data:`TOKEN_ID_SUFFIX`) that is a
    list of integers (one level). Empty for rows of text only. ``schema``: the shard's column dtypes."""
    out = [roles.input_ids] if roles.input_ids is not None and roles.input_ids in schema else []
    out += [c for c in (roles.chosen, roles.rejected) if c is not None and _int_list(schema.get(c, pl.Null()))]
    out += [c for c, t in schema.items() if c.endswith(TOKEN_ID_SUFFIX) and _int_list(t)]
    return tuple(dict.fromkeys(out))


def float_vector_labels(schema: dict[str, pl.DataType]) -> bool:
    """Whether the shard's ``labels`` column is a one-level list of floats (``List(Float*)``): a
    multi-label (or multi-output) target vector when it does not align with a token sequence
    (:func:`resolve_roles`' ``label_vectors``), else token labels written as floats."""
    t = schema.get("labels")
    return isinstance(t, (pl.List, pl.Array)) and list_depth(t) == 1 and inner_dtype(t).is_float()


def resolve_roles(cfg: ColumnsSection, schema: dict[str, pl.DataType], class_domain: bool = False,
                  label_vectors: bool = False) -> Roles:
    """Resolve roles against one shard's schema (``{column: dtype}``).

    A ``labels`` column of float lists (:func:`float_vector_labels`) is the ``target`` role, a
    multi-label target (Hugging Face's ``problem_type="multi_label_classification"``: one float per
    class, as ``BCEWithLogitsLoss`` needs them) or a multi-output regression target, when no token
    sequence sits beside it (no ``input_ids``, no ``tokens`` words) or when ``label_vectors`` says
    the rows show it (the caller read them: every sampled row's list of one length, unlike the
    ids'; :func:`datacheck.derive.read.open_for_checks`); else it stays token labels, and its float
    dtype is ``schema.dtype``. It was always token labels: every clean multi-label shard failed
    with ``schema.dtype`` ("a float id cannot index an embedding").

    Inference of the class label: a scalar ``label`` (else ``labels``) column of integer, string,
    categorical or boolean dtype. A float ``label`` column (e.g. STS-B similarity scores in
    ``[0, 5]``) is a regression target: it is inferred as ``target`` (when ``[columns] target`` is
    not given), so the ``finite.*`` checks apply and the label checks do not. A column the config
    gives as ``target`` or ``features`` is never inferred as the label. A float column the config
    names as ``label`` stays the label (integer classes stored as floats, e.g. with NaN for missing).
    With ``class_domain`` (``[labels] num_classes`` or ``classes`` is set) a float ``label`` is the
    class label too: integral floats (6.0) are class indices, fractional ones (2.5) are
    ``labels.out_of_range``, negative ones (-1.0) sentinels.

    Token classification (Hugging Face CoNLL layout): when ``[columns]`` omits them, a
    list-of-strings ``tokens`` column is text, the first integer-list column of :data:`TAG_NAMES`
    is the token ``labels`` (when the shard has no ``labels``), and ``tokens`` with every tag
    column present forms an ``aligned`` group (``length.mismatch``).
    """
    inferred: set[str] = set()
    missing: list[tuple[str, str]] = []

    def keep(role: str, cols: tuple[str, ...]) -> tuple[str, ...]:
        present = []
        for c in cols:
            if c in schema:
                present.append(c)
            else:
                missing.append((role, c))
        return tuple(present)

    def one(role: str, col: str | None) -> str | None:
        if col is None:
            return None
        got = keep(role, (col,))
        return got[0] if got else None

    text = keep("text", _as_tuple(cfg.text))
    if cfg.text is None:
        text = tuple(c for c in _TEXT_NAMES if c in schema
                     and (schema[c] == pl.String or _all_null(schema[c]) or _dictionary_text(schema[c])))
        if text:
            inferred.add("text")
    label = one("label", cfg.label)
    labels = one("labels", cfg.labels)
    # columns the config gives a numeric role are never inferred as anything else
    numeric_given = set(_as_tuple(cfg.target)) | set(_as_tuple(cfg.features))
    # a float-list ``labels`` that aligns with no token sequence is a multi-label target vector
    vector = (cfg.labels is None and cfg.target is None and "labels" not in numeric_given and "labels" not in text
              and float_vector_labels(schema) and (label_vectors or ((cfg.input_ids or "input_ids") not in schema
                                                                    and WORDS_NAME not in schema)))
    # an all-null ``labels`` beside input_ids is token labels, elsewhere a class label
    token_shaped = not vector and "labels" in schema and (is_list(schema["labels"])
                                                          or (_all_null(schema["labels"]) and "input_ids" in schema))
    inferred_target: list[str] = ["labels"] if vector else []
    if vector:
        inferred.add("target")
    if cfg.label is None:
        for cand in ("label", "labels"):
            if (cand not in schema or is_list(schema[cand]) or cand == labels or cand in numeric_given
                    or (cand == "labels" and token_shaped)):
                continue
            if _class_label_dtype(schema[cand]) or (class_domain and _float_like(schema[cand])):
                label = cand
                inferred.add("label")
                break
            if _float_like(schema[cand]) and cfg.target is None:
                # a float ``label`` (e.g. STS-B similarity scores) is a regression target, not a class
                inferred_target.append(cand)
                inferred.add("target")
                break
    if (cfg.label is None and label is None and not inferred_target and "label" not in schema
            and "labels" not in schema):
        # a class name column of its own (NAME_LABELS: dair-ai emotion's ``label_name``, SetFit's
        # ``label_text``), only when no ``label``/``labels`` column exists: beside one (SetFit's pair
        # ``label`` + ``label_text``) it names that label's classes and is no second label
        named_label = [c for c in NAME_LABELS if c in schema and _class_name_dtype(schema[c])
                       and c not in numeric_given and c not in text]
        if len(named_label) == 1:
            label = named_label[0]
            inferred.add("label")
    if (cfg.label is None and cfg.target is None and label is None and not inferred_target
            and "label" not in schema and "labels" not in schema):
        # an integer or Boolean column named as a target (CLASS_TARGET_NAMES: scikit-learn's ``y``,
        # Kaggle's ``target``) is the class label, as a float one is the regression target below:
        # a numeric shard of features and an integer ``target`` was of no layout and its null
        # features passed (a string ``targets`` is seq2seq target text, never a class)
        named_class = next((c for c in CLASS_TARGET_NAMES if c in schema and _class_index_dtype(schema[c])
                            and c not in numeric_given and c not in text), None)
        if named_class is not None:
            label = named_class
            inferred.add("label")
    if cfg.target is None and not inferred_target and label is None:
        # a float column named as a regression target (TARGET_NAMES: the name rule the layout
        # recognizer reads, derive/layout.py), when no class label was found
        named_target = next((c for c in TARGET_NAMES[2:] if c in schema and _float_like(schema[c])
                             and c not in numeric_given and c not in text), None)
        if named_target is not None:
            inferred_target.append(named_target)
            inferred.add("target")
    if cfg.labels is None and token_shaped and label != "labels" and "labels" not in numeric_given:
        labels = "labels"
        inferred.add("labels")
    tags = tuple(c for c in TAG_NAMES if c in schema and _int_list(schema[c]) and c not in numeric_given)
    if cfg.labels is None and labels is None and "labels" not in schema and tags:
        labels = tags[0]
        inferred.add("labels")
    words = WORDS_NAME in schema and _string_list(schema[WORDS_NAME]) and WORDS_NAME not in numeric_given
    if cfg.text is None and words and tags and WORDS_NAME not in text:
        text = (*text, WORDS_NAME)
        inferred.add("text")
    named = {}
    for role in _NAMED_ROLES:
        given = getattr(cfg, role)
        if given is not None:
            named[role] = one(role, given)
        elif role in schema and role not in numeric_given and role not in text:
            # named as Hugging Face names it: the role, whatever its dtype (a dtype that cannot
            # serve it, e.g. a CSV cell holding "[1, 2]", is reported as schema.dtype)
            named[role] = role
            inferred.add(role)
        elif other := next((c for c in ROLE_SPECS[role].infer[1:] if c in schema and c not in numeric_given
                            and c not in text and (message_fields(schema[c]) is not None
                                                   or (c.endswith("_input_ids") and _int_list(schema[c]))
                                                   or (ROLE_SPECS[role].dtype == "mask_list" and _mask_list(schema[c])))),
                            None):
            # a second name (ShareGPT ``conversations``, TRL's ``chosen_input_ids``, transformers'
            # ``assistant_masks``) only when its dtype serves the role (messages; token ids for a
            # ``*_input_ids`` name; a 0/1 list for a mask)
            named[role] = other
            inferred.add(role)
        else:
            named[role] = None
    aligned = tuple(keep("aligned", tuple(g)) for g in (cfg.aligned or ()))
    if cfg.aligned is None and words and tags:
        aligned = ((WORDS_NAME, *tags),)
        inferred.add("aligned")
    return _with_stand_ins(Roles(
        text=text,
        label=label,
        target=keep("target", _as_tuple(cfg.target)) if cfg.target is not None else tuple(inferred_target),
        features=keep("features", _as_tuple(cfg.features)),
        labels=labels,
        aligned=tuple(g for g in aligned if len(g) >= 2),
        inferred=frozenset(inferred),
        missing=tuple(missing),
        **named,
    ), cfg, schema)


def _serves(role: str, dtype: pl.DataType) -> bool:
    """Whether a column of ``dtype`` can serve ``role`` by the schema-only rules of
    :func:`role_dtype_problems` (token and mask lists, messages, a scalar class label)."""
    rule = ROLE_SPECS[role].dtype
    if rule in ("int_list", "mask_list"):
        inner = inner_dtype(dtype)
        return list_depth(dtype) == 1 and (inner.is_integer() or (rule == "mask_list" and (inner == pl.Boolean
                                                                                          or inner.is_float())))
    if rule == "messages":
        return message_fields(dtype) is not None
    if rule == "class_label":
        return not is_list(dtype)
    return True


#: the dtype rules whose role a declared column of another dtype is replaced in by the role's
#: standard column (token ids, masks, token labels, conversations): the checks that read them run on it
_STAND_IN_RULES = frozenset({"int_list", "mask_list", "messages"})


def stand_in_column(role: str, schema: dict[str, pl.DataType], taken: set[str]) -> str | None:
    """The column read for a declared ``role`` the shard lacks (or holds in a dtype that cannot
    serve it): the first of its standard names (``ROLE_SPECS[role].infer``: ``input_ids``,
    ``attention_mask``, ``labels``, ...) present, not in ``taken`` (another role's column, or the
    declared one), of a dtype that serves it (:func:`_serves`: an integer list for token roles, a
    0/1-able list for a mask, a list of structs for messages, a scalar for a class label); None for
    roles of several columns and when no column fits."""
    spec = ROLE_SPECS.get(role)
    if spec is None or spec.arity != "one":
        return None
    for c in spec.infer:
        t = schema.get(c)
        if t is None or c in taken or t == pl.Null:
            continue
        if _serves(role, t):
            return c
    return None


def _with_stand_ins(roles: Roles, cfg: ColumnsSection, schema: dict[str, pl.DataType]) -> Roles:
    """``roles`` with each mistyped ``[columns]`` role of one column replaced by its standard column
    (:func:`stand_in_column`): a declared column the shard lacks (``missing``; any such role), or one
    whose dtype cannot serve a token, mask or conversation role (``[columns] input_ids = "text"``
    beside an ``input_ids`` column). The checks of the role then run on the standard column, which
    the Hugging Face layout holds; the mistake is said once, by ``schema.missing_column`` or
    ``schema.dtype`` (:func:`stand_in_message`), never by a skipped check per role."""
    taken = {c for r in ROLE_NAMES for c in roles.of(r)}
    stand: dict[str, str] = {}
    said: list[tuple[str, str, str]] = []
    for role, col in roles.missing:
        if role in stand or roles.of(role):
            continue
        got = stand_in_column(role, schema, taken)
        if got is not None:
            stand[role] = got
            taken.add(got)
            said.append((role, col, got))
    for spec in ROLE_TABLE:
        given: str | None = getattr(roles, spec.name) if spec.arity == "one" else None
        if (given is None or spec.dtype not in _STAND_IN_RULES or spec.name in roles.inferred or spec.name in stand
                or getattr(cfg, spec.name, None) is None or given not in schema or schema[given] == pl.Null
                or _serves(spec.name, schema[given])):
            continue
        got = stand_in_column(spec.name, schema, taken)
        if got is not None:
            stand[spec.name] = got
            taken.add(got)
            said.append((spec.name, given, got))
    if not stand:
        return roles
    out: Any = replace(cast(Any, roles), **stand, inferred=roles.inferred | frozenset(stand), stand_ins=tuple(said))
    return cast(Roles, out)


def stand_in_message(role: str, declared: str, used: str, shard: str, dtype: pl.DataType | None) -> str:
    """The one message that says a ``[columns]`` mistake whose role a standard column stood in for
    (:func:`_with_stand_ins`): ``dtype`` None, the declared column is absent (``schema.missing_column``);
    else its dtype cannot serve the role (``schema.dtype``)."""
    what = (f"is absent from {shard}" if dtype is None else
            f"has dtype {dtype}, expected {_EXPECTED.get(role, 'a dtype that serves the role')}")
    return (f"column {declared!r} (role {role} in [columns]) {what}; the shard's standard {role} column "
            f"{used!r} was read in its place and the {role} checks ran on it. Fix [columns] {role} "
            f"(unset it to read {used!r}, or name the column the role is in)")


def null_role_casts(roles: Roles, schema: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``{column: dtype}`` for the role columns of dtype ``Null`` (every value null in this shard, as
    polars infers from JSON/CSV): text as String, class label Int64, target/features Float64, token
    columns List(Int64); and for token columns of dtype ``List(Null)`` (every list empty or all its
    elements null): List(Int64). The runner casts them so that the role's checks run and report
    the nulls (e.g. a null id is ``tokens.out_of_vocab``)."""
    out: dict[str, pl.DataType] = {}
    for spec in ROLE_TABLE:
        dtype = spec.null_as
        if dtype is None:
            continue
        for c in roles.of(spec.name):
            if c not in schema:
                continue
            if _all_null(schema[c]) or (_null_elements(schema[c]) and isinstance(dtype, pl.List)):
                out.setdefault(c, dtype)
    return out


def _integral_decimal(t: pl.DataType) -> bool:
    """A decimal of scale 0 (SQL ``NUMERIC(p, 0)``, Snowflake's and Oracle's ``NUMBER(38, 0)``
    exported to parquet): whole numbers of up to 38 digits, every one an Int128."""
    return isinstance(t, pl.Decimal) and t.scale == 0


def _fractional_decimal(t: pl.DataType) -> bool:
    """A decimal of scale above 0 (SQL ``NUMERIC(10, 2)``): a number with a fractional part, read
    as Float64 by the label and numeric roles (:func:`decimal_casts`)."""
    return isinstance(t, pl.Decimal) and (t.scale or 0) > 0


def _float_like(t: pl.DataType) -> bool:
    """A float dtype, or a decimal with a fractional part (:func:`_fractional_decimal`)."""
    return t.is_float() or _fractional_decimal(t)


def decimal_casts(roles: Roles, schema: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``{column: Float64}`` for the class label and the ``target``/``features`` columns stored as
    decimals with a fractional part (``decimal(10, 2)`` from a SQL export): read as Float64, as a
    float column is (a class label 1.50 is "not an integer class index", a target's values get the
    numeric checks). Integral decimals are integers: :func:`wide_int_casts`."""
    out: dict[str, pl.DataType] = {}
    for c in (*([roles.label] if roles.label else []), *roles.of("target"), *roles.of("features")):
        t = schema.get(c)
        if t is not None and _fractional_decimal(t):
            out.setdefault(c, pl.Float64())
    return out


def _int128(t: pl.DataType) -> bool:
    """Whether ``t`` (or the innermost dtype of its lists) holds whole numbers wider than 64 bits:
    ``Int128``, ``UInt128``, or an integral decimal (:func:`_integral_decimal`)."""
    inner = t
    while isinstance(inner, (pl.List, pl.Array)):
        inner = inner.inner  # type: ignore[assignment]
    return inner == pl.Int128 or str(inner) == "UInt128" or _integral_decimal(inner)


def narrows_wide_int(source: pl.DataType, target: pl.DataType) -> bool:
    """Whether casting ``source`` to ``target`` reads 128-bit integers as 64-bit ones (the casts of
    :func:`wide_int_casts`, made by :func:`cast_expr`: a value beyond 64 bits read at Int64's nearest
    bound); every other cast of the read path is strict."""
    return _int128(source) and (target == pl.Int64 or target == pl.List(pl.Int64))


#: Int64's range, the bounds a 128-bit integer of a role column is read at (:func:`cast_expr`)
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def cast_expr(name: str, source: pl.DataType, target: pl.DataType) -> pl.Expr:
    """The read path's cast of column ``name`` from ``source`` to ``target``: the one rule of the
    one-frame read (:mod:`datacheck.derive.read`) and of each batch
    (:func:`datacheck.formats.base.cast_frame`).

    Strict (polars raises on a value that does not fit), except where ``source`` holds 128-bit
    integers read as the role's 64-bit dtype (:func:`narrows_wide_int`): each value is clipped to
    ``[INT64_MIN, INT64_MAX]`` first, so a value beyond 64 bits (``18446744073709551616`` in JSON,
    a CSV cell ``99999999999999999999``) is read as Int64's nearest bound, never as null: no
    ``vocab_size``, ``num_classes`` or position limit reaches ``INT64_MAX`` (config bounds them
    below it), so the range checks report the row (``tokens.out_of_vocab``,
    ``labels.out_of_range``; a value below ``INT64_MIN``: ``labels.unexpected_sentinel``) with the
    bound as its value, where a null made it ``labels.null`` or no finding at all. (Only an
    ``ignore_index`` or ``pad_token_id`` configured as exactly ``INT64_MIN``/``INT64_MAX`` would
    match such a value.)"""
    col = pl.col(name)
    if not narrows_wide_int(source, target):
        return col.cast(target)
    inner: pl.DataType = source.inner if isinstance(source, (pl.List, pl.Array)) else source  # type: ignore[assignment]

    def bound(e: pl.Expr) -> pl.Expr:  # an unsigned value is never below INT64_MIN (nor can it hold it)
        return e.clip(upper_bound=INT64_MAX) if str(inner) == "UInt128" else e.clip(INT64_MIN, INT64_MAX)

    wide = pl.Int128() if _integral_decimal(inner) else inner  # a decimal of 38 digits fits Int128
    if isinstance(source, (pl.List, pl.Array)) and _int128(inner) and not isinstance(inner, (pl.List, pl.Array)):
        return col.cast(pl.List(wide)).list.eval(bound(pl.element())).cast(target)
    if isinstance(source, (pl.List, pl.Array)):  # deeper lists: not a role's dtype; as before, non-strict
        return col.cast(target, strict=False)
    return bound(col.cast(wide)).cast(target)


def wide_int_casts(roles: Roles, schema: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``{column: dtype}`` for the integer role columns read as 128-bit integers (a JSON value beyond
    64 bits, such as ``18446744073709551616`` in ``input_ids``) or stored as integral decimals
    (``decimal(38, 0)`` from a SQL export): read as the role's 64-bit dtype
    (``Int64``, ``List(Int64)``) by :func:`cast_expr`, a value beyond 64 bits at Int64's nearest
    bound (an id or label no vocabulary or class count reaches: the role's range checks report
    it). The runner casts them so that the checks (numpy has no 128-bit integers) run."""
    out: dict[str, pl.DataType] = {}
    for spec in ROLE_TABLE:
        dtype = spec.null_as
        if dtype is None or not (dtype == pl.Int64 or dtype == pl.List(pl.Int64)):
            continue
        for c in roles.of(spec.name):
            t = schema.get(c)
            if t is not None and _int128(t):
                out.setdefault(c, pl.List(pl.Int64) if isinstance(t, (pl.List, pl.Array)) else pl.Int64())
    return out


def text_casts(roles: Roles, schema: dict[str, pl.DataType]) -> dict[str, pl.DataType]:
    """``{column: dtype}`` for the text columns stored dictionary-encoded (``Categorical``/``Enum``,
    or a list of them): read as ``String`` (``List(String)``), the same values, so that the text
    checks and the row hashes see text whatever its storage."""
    out: dict[str, pl.DataType] = {}
    for c in roles.text:
        t = schema.get(c)
        if t is not None and _dictionary_text(t):
            out[c] = pl.List(pl.String) if isinstance(t, (pl.List, pl.Array)) else pl.String()
    return out


#: Columns without a role that condition what the model is trained on, so two rows that differ in
#: one of them are different samples even when their role columns are equal: a preference or
#: prompt-completion row's ``prompt`` (TRL's dataset formats; tokenized, ``prompt_input_ids``:
#: ``DPOTrainer.tokenize_row``, KTO's), the ``system`` prompt and ``tools``
#: a chat template renders with the conversation (transformers' ``apply_chat_template(tools=...)``,
#: LLaMA-Factory's ShareGPT columns), and the media of a vision or audio sample (``images``,
#: ``videos``, ``audios``: TRL and LLaMA-Factory; the audio features of a speech sample,
#: :data:`AUDIO_COLUMNS`). They join the row content after the role columns.
CONTEXT_COLUMNS = ("prompt", "prompt_input_ids", "system", "tools", "images", "videos", "audios",
                   "input_values", "input_features")
#: Hugging Face audio feature columns: the raw waveform (wav2vec2's ``input_values``) and log-mel frames
#: (Whisper's ``input_features``); a speech sample's own content (its ``labels`` are only its transcript)
AUDIO_COLUMNS = ("input_values", "input_features")
#: The roles that hold a row's own content, what tells one sample from another (a text, a conversation,
#: token ids, a preference pair, numeric features, an aligned word list), grouped by kind: every
#: other role is derived from it (masks, positions, token types, token labels aligned with the ids)
#: or is what the row answers (class label, target). A row content without one of them cannot tell
#: samples apart (:func:`content_gap`).
OWN_CONTENT_ROLES: tuple[tuple[str, ...], ...] = (("text",), ("messages",), ("input_ids",), ("chosen", "rejected"),
                                                  ("features",), ("aligned",))
#: Columns a reader adds to name a sample: WebDataset's ``__key__`` (the members' common name before
#: their extensions, unique per sample). A sample's identity, never its content: with them, no two
#: samples of a shard without roles could ever be duplicates.
KEY_COLUMNS = ("__key__",)


def row_content(role_columns: list[str], label: str | None, columns: list[str],
                targets: tuple[str, ...] = ()) -> list[str]:
    """The columns a row's content is made of for the ``dup.*`` checks (CHECKS.md "dup").

    The answers of a row are its class label ``label`` and its regression ``targets`` (what the
    model predicts, never what tells two inputs apart).

    - the role columns (the roles marked ``content`` in :data:`ROLE_TABLE`, in table order) when one
      of them is not an answer, followed by the shard's :data:`CONTEXT_COLUMNS` that are not role
      columns (in that tuple's order): other columns without a role (an ``idx``) never make rows
      distinct;
    - else every column but the answers and the reader's :data:`KEY_COLUMNS`, then the answers: a
      shard whose only roles are its answers (numeric features and a class, or a float ``label`` /
      ``[columns] target`` regression target, with no ``[columns] features``) is compared on its
      features, never on the answer alone (two rows of one target value are no duplicates); a
      WebDataset shard on its members, never on its sample keys;
    - else (the answers are the shard's only columns) the answers alone: ``dup.*`` skip such a shard.

    Args:
        role_columns: ``Roles.columns()`` of the shard.
        label: the class label column (``Roles.label``), or None.
        columns: every column of the shard, in its order.
        targets: the regression target columns (``Roles.target``).
    """
    answers = ([label] if label is not None else []) + [t for t in targets if t != label]
    if any(c not in answers for c in role_columns):
        present = set(columns)
        return list(role_columns) + [c for c in CONTEXT_COLUMNS if c in present and c not in role_columns]
    others = [c for c in columns if c not in answers and c not in KEY_COLUMNS]
    if others:
        return others + [c for c in answers if c in columns]
    return list(role_columns) or list(columns)


def content_gap(roles: Roles, content: list[str]) -> str | None:
    """Why the row content ``content`` (:func:`row_content` of the shard) cannot tell its samples
    apart, in words with the fix, or None when it can. The ``dup.*`` checks skip such a shard: two
    rows equal in what is left (an attention mask, a token-type list, a class label) are not known
    to be the same sample, and comparing them reports most of a clean shard as repeats.

    The content cannot tell samples apart when it is made of role columns (the first case of
    :func:`row_content`; a shard compared on all its columns always can) and

    - a kind of :data:`OWN_CONTENT_ROLES` is declared in ``[columns]`` with some of its columns
      in ``content`` and some absent from the shard (``text = ["title", "body"]`` without ``body``; ``chosen`` without
      ``rejected``): the rows would be compared on part of what they hold; or
    - it holds no column of a row's own content: no column of :data:`OWN_CONTENT_ROLES`, no token id
      column named ``*_input_ids`` (:data:`TOKEN_ID_SUFFIX`) other than a prompt's, no audio
      (:data:`AUDIO_COLUMNS`), e.g. ``[columns] input_ids = "ids"`` on a shard whose ids are in
      ``input_ids``: only the mask, token types and label are left.

    A kind declared but wholly absent while another kind is present (``[columns] features`` on a
    shard of text) leaves the content whole: its rows are compared on the kinds present.

    Args:
        roles: the shard's resolved roles (``Roles.missing``: the declared columns it lacks).
        content: the row content's columns (:func:`row_content`).
    """
    answers = {roles.label, *roles.of("target")}
    if not any(c in content and c not in answers for c in roles.columns()):
        return None
    stood = {(r, c) for r, c, _used in roles.stand_ins}  # read from the role's standard column: not lacking
    lacking = [(r, c) for r, c in roles.missing if any(r in kind for kind in OWN_CONTENT_ROLES) and (r, c) not in stood]

    def named(pairs: list[tuple[str, str]]) -> str:
        return "; ".join(f"[columns] {r} names {c!r}" for r, c in pairs)

    for kind in OWN_CONTENT_ROLES:
        gone = [(r, c) for r, c in lacking if r in kind]
        kept = [c for r in kind for c in roles.of(r) if c in content]
        if gone and kept:
            return (f"{named(gone)}, which this shard lacks, so its rows would be compared on part of their "
                    f"{'/'.join(kind)} content ({', '.join(kept)}) and rows that differ only in the missing column "
                    f"would be reported as repeats; fix [columns] {gone[0][0]} to the shard's column")
    own = {c for kind in OWN_CONTENT_ROLES for r in kind for c in roles.of(r)}
    own |= {c for c in content if c in AUDIO_COLUMNS or (c.endswith(TOKEN_ID_SUFFIX) and c not in CONTEXT_COLUMNS)}
    if any(c in own for c in content):
        return None
    shown = ", ".join(content)
    if lacking:
        fix = "; ".join(f"set [columns] {r} to the shard's column that holds it (or remove the key to infer it)"
                        for r, _c in lacking[:1])
        return (f"{named(lacking)}, which this shard lacks, so the row content is only {shown}: that tells "
                f"no sample from another (a row's text, token ids, messages, preference pair or features are "
                f"not in it) and equal rows of it are not repeats; {fix}")
    return (f"the row content is only {shown}: it holds none of a row's own content (text, token ids, messages, "
            f"a preference pair, features or audio), so equal rows of it are not known to be repeats; set "
            f"[columns] text, input_ids, messages, chosen/rejected or features to the column that holds it")


def text_column_names(cfg: ColumnsSection) -> tuple[str, ...]:
    """Columns that hold text: the configured ``[columns] text`` plus the names inferred as text.
    CSV/TSV readers keep them as strings even when every value looks like a number."""
    return tuple(dict.fromkeys((*_as_tuple(cfg.text), *_TEXT_NAMES)))


#: the decoder-side list columns of a Hugging Face encoder-decoder (T5, BART) shard
DECODER_COLUMNS = ("decoder_input_ids", "decoder_attention_mask")


def seq2seq_layout(schema_name: str | None, schema: dict[str, pl.DataType], layout: str | None = None) -> str | None:
    """Why the shard is an encoder-decoder (seq2seq) layout, in words, or None.

    The rule: in causal-LM and token-classification data ``labels[i]`` belongs to
    ``input_ids[i]``; in seq2seq data (T5, BART) ``labels`` is the target sequence, of its own
    length, and aligns with the decoder columns (:data:`DECODER_COLUMNS`) when the shard has them,
    else with nothing. A shard is seq2seq when

    - ``[dataset] schema = "seq2seq"`` (the built-in layout) is set, or
    - ``layout`` (the shard's layout, :mod:`datacheck.model.layouts`) is ``seq2seq``, or
    - it has a list-typed ``decoder_input_ids`` or ``decoder_attention_mask`` column.

    Otherwise (lists of varying length and no declaration) labels align with ``input_ids`` and a
    row whose lengths differ is ``length.mismatch``, whose message names this setting.
    """
    if schema_name == "seq2seq":
        return '[dataset] schema = "seq2seq"'
    if layout == "seq2seq":
        return "the shard's layout is seq2seq"
    dec = [c for c in DECODER_COLUMNS if c in schema and is_list(schema[c])]
    if dec:
        return f"decoder column {dec[0]!r}"
    return None


def list_depth(dtype: pl.DataType) -> int:
    """How many list/array levels ``dtype`` has (0 for a scalar, 2 for ``List(List(Int64))``)."""
    depth = 0
    while isinstance(dtype, (pl.List, pl.Array)):
        dtype = dtype.inner  # type: ignore[assignment]
        depth += 1
    return depth


@dataclass(frozen=True)
class RoleDtypeProblem:
    """A role column whose dtype cannot serve the role (reported as ``schema.dtype``).

    Attributes:
        role: the role (``input_ids``, ``label``, ...).
        column: the column.
        found: the column's dtype, as polars prints it.
        expected: what the role needs, in words.
        cause: the likely cause and remedy, in words.
    """

    role: str
    column: str
    found: str
    expected: str
    cause: str

    @property
    def message(self) -> str:
        """The ``schema.dtype`` finding's message."""
        return (f"column {self.column!r} (role {self.role}) has dtype {self.found}, expected {self.expected}: "
                f"{self.cause}. The {self.role} checks did not run on this shard")

    @property
    def skip_reason(self) -> str:
        """What a check that needs this role says when it cannot run."""
        return (f"{self.role} column {self.column!r} has dtype {self.found}, not {self.expected} "
                "(reported as schema.dtype)")


_INT_LIST = "a list of integers"
#: what each dtype rule of the role table needs, in words
_EXPECTED_BY_RULE = {
    "int_list": _INT_LIST,
    "mask_list": "a list of 0/1 integers or booleans",
    "text": "a string (or a list of strings)",
    "numeric": "numbers (or lists of numbers)",
    "messages": ("a list of {role, content} structs (ShareGPT {from, value}); content a string or a list of "
                 "{type, text|value} parts"),
}
_EXPECTED = {r.name: _EXPECTED_BY_RULE[r.dtype] for r in ROLE_TABLE if r.dtype in _EXPECTED_BY_RULE}


def _line_format(shard: str) -> str | None:
    name = shard.lower()
    for suffix in (".gz", ".zst", ".zstd", ".bz2", ".xz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    return None


def _cause(role: str, col: str, dtype: pl.DataType, fmt: str | None, want_list: bool) -> str:
    """The likely cause of a role column of the wrong dtype, in words (by dtype and file format)."""
    inner = inner_dtype(dtype)
    depth = list_depth(dtype)
    if role == "messages":
        if dtype == pl.String:
            return (f"each row holds {col!r} as one string (e.g. JSON text or a rendered transcript), not a list of "
                    "turns; store the turns as a list of {role, content} objects")
        return (f"{col!r} is {dtype}: each turn needs a speaker field (role or from, a string) and a content field "
                "(content or value: a string, or a list of {type, text|value} parts); rename or convert the fields")
    if want_list and depth >= 2:
        return ("each row holds a list of lists (e.g. a multiple-choice or pre-batched layout), not one sequence; "
                "flatten it to one sequence per row")
    if want_list and depth == 0:
        if dtype == pl.String and fmt == "csv":
            return f"CSV/TSV cells hold {col!r} as text (e.g. \"[1, 2, 3]\"); store token columns in parquet, Arrow or JSONL"
        return f"each row holds a single {dtype} value where {role} needs a sequence; check [columns] {role}"
    if inner == pl.String:
        if fmt == "jsonl":
            return (f"the JSONL lines hold {col!r} as strings (e.g. \"1\"); write numbers as JSON numbers "
                    "(lines that mix JSON types are reported by the reader with their line numbers)")
        return (f"the values of {col!r} are strings; write them as numbers, or check [columns] {role}"
                if role != "label" else
                "the labels are strings: give [labels] classes (the class names) instead of num_classes, "
                "or write the labels as integers")
    if inner.is_float():
        return (f"the values of {col!r} are floats: some are not integers (e.g. 2.5), or integers were written as "
                "floats (1.0); a float id cannot index an embedding. Write integers")
    return f"check [columns] {role} (it names a column of dtype {dtype})"


def role_dtype_problems(roles: Roles, schema: dict[str, pl.DataType], num_classes: int | None = None,
                        classes: tuple[Any, ...] | list[Any] | None = None, shard: str = "") -> list[RoleDtypeProblem]:
    """Role columns whose dtype cannot serve their role, decided from the shard's schema alone.

    Rules (the dtype each role needs):

    - ``input_ids``, ``token_type_ids``, token ``labels``: one list level of integers
      (``List``/``Array`` of Int*/UInt*). A string, a float list (e.g. ``[1, 2.5]`` in JSONL) or a
      list of lists fails.
    - ``attention_mask``: one list level of integers, booleans or floats (float values other than
      0/1 are ``mask.non_binary``). A string list or a list of lists fails.
    - ``label`` (class label): a scalar. With ``num_classes`` (and no ``classes``) it must be
      integer, float (integral values) or boolean; with numeric ``classes``, likewise; with string
      ``classes``, integer or float (a Hugging Face ``ClassLabel`` index; pandas stores it as float
      when a label is missing; a fractional value is ``labels.out_of_range``) or string.
    - ``text``: String, or a list of String. ``target``/``features``: numeric or list of numeric.
    - ``messages``: a list of structs with a speaker and a content field (:func:`message_fields`).

    Args:
        roles: the shard's resolved roles.
        schema: ``{column: polars dtype}`` of the shard (all-null role columns already cast).
        num_classes: ``[labels] num_classes``.
        classes: ``[labels] classes``.
        shard: the shard's path (its extension names the likely cause, e.g. JSONL type mixing).

    Returns:
        One :class:`RoleDtypeProblem` per (role, column), in role order.
    """
    fmt = _line_format(shard)
    out: list[RoleDtypeProblem] = []

    def add(role: str, col: str, expected: str, want_list: bool) -> None:
        t = schema[col]
        out.append(RoleDtypeProblem(role, col, str(t), expected, _cause(role, col, t, fmt, want_list)))

    for role in [r.name for r in ROLE_TABLE if r.dtype in ("int_list", "mask_list")]:
        col = getattr(roles, role)
        if col is None or col not in schema:
            continue
        t = schema[col]
        inner = inner_dtype(t)
        ok_inner = inner.is_integer() or (ROLE_SPECS[role].dtype == "mask_list" and (inner == pl.Boolean or inner.is_float()))
        if list_depth(t) != 1 or not ok_inner:
            add(role, col, _EXPECTED[role], True)
    col = roles.label
    if col is not None and col in schema:
        t = schema[col]
        string_classes = classes is not None and any(isinstance(x, str) for x in classes)
        numeric_ok = t.is_integer() or t.is_float() or t == pl.Boolean
        if is_list(t):
            add("label", col, "a scalar class label (token labels belong in [columns] labels)", False)
        elif string_classes:
            if not (t.is_integer() or t.is_float() or t in (pl.String,) or isinstance(t, (pl.Categorical, pl.Enum))):
                add("label", col, "an integer class index or a class name (string)", False)
        elif classes is not None or num_classes is not None:
            if not numeric_ok:
                add("label", col, "an integer class index (num_classes is set)" if classes is None
                    else "an integer class index (classes are numbers)", False)
    for c in roles.text:
        ct = schema.get(c)
        if ct is not None and not (ct == pl.String or (list_depth(ct) == 1 and inner_dtype(ct) == pl.String)):
            add("text", c, _EXPECTED["text"], False)
    col = roles.messages
    if col is not None and col in schema and schema[col] != pl.Null and message_fields(schema[col]) is None:
        add("messages", col, _EXPECTED["messages"], False)
    for role in [r.name for r in ROLE_TABLE if r.dtype == "numeric"]:
        for c in roles.of(role):
            nt = schema.get(c)
            if nt is not None and not (inner_dtype(nt).is_numeric() or inner_dtype(nt) == pl.Boolean):
                add(role, c, _EXPECTED[role], False)
    return out


def role_problem(problems: list[RoleDtypeProblem], role: str, column: str | None = None) -> RoleDtypeProblem | None:
    """The problem of ``role`` (optionally of one ``column`` of it), or None when its dtype serves the role."""
    for p in problems:
        if p.role == role and (column is None or p.column == column):
            return p
    return None
