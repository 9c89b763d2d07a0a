"""Writing a contract from the data (``datacheck schema infer``).

For every column of the shards (one aggregate query per shard, merged exactly):

- ``dtype`` (when every shard agrees) and ``nullable`` (true when any value is null; NaN is not
  null, it is ``finite.nan``'s);
- the label column (role ``label``, see :mod:`datacheck.model.roles`): ``isin`` of the observed classes
  (at most :data:`MAX_CLASSES`, else a range for numbers);
- other numeric scalars: ``in_range`` of the observed finite minimum and maximum;
- list columns: in the ``datacheck:`` section, the observed length bounds and, for numeric
  elements, the finite element minimum and maximum, EXCEPT for role columns whose values are ids
  or flags (:func:`element_bounds`): their bounds come from the model's facts (``input_ids`` in
  ``[0, vocab_size)`` from ``[tokens] vocab_size`` or the tokenizer, masks in ``[0, 1]``, ...) or
  are left out with a note, never from the observed range: a shard whose rarest token id was
  never seen before would fail a contract bounded by what one sample happened to hold.

The output is Pandera's polars YAML form (``pandera.io.polars_io.serialize_schema``) plus the
``datacheck:`` section, so auditing the same data against it passes.
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import polars as pl

from datacheck.contracts.load import CONTRACT_FORMAT_VERSION, contract_from_dict
from datacheck.derive.layout import REFINES, hidden_prompts, padding_side_of, recognize
from datacheck.derive.read import open_for_checks
from datacheck.derive.tokenizer import tokenizer_facts, with_tokenizer_facts
from datacheck.formats.discovery import discover
from datacheck.io.shardbytes import Unreadable
from datacheck.model.config import Config
from datacheck.model.errors import OutOfMemory, UsageError
from datacheck.model.layouts import Layout
from datacheck.model.roles import INT64_MAX, INT64_MIN, inner_dtype, is_list, list_depth, seq2seq_layout

__all__ = ["infer_contract", "infer_yaml", "infer_config", "element_bounds", "MAX_CLASSES", "LayoutProposal", "propose_layout",
           "SAMPLE_ROWS"]

#: A label column with more distinct values than this gets a range, not a class list.
MAX_CLASSES = 1000


#: roles whose list elements are token ids of the vocabulary (chosen/rejected when tokenized)
_VOCAB_ROLES = ("input_ids", "chosen", "rejected")
#: roles whose list elements are 0/1 flags
_FLAG_ROLES = ("attention_mask", "assistant_mask")
#: roles whose list elements are ids with no bound datacheck knows (document numbers, lengths)
_UNBOUNDED_ROLES = ("document_ids", "seq_lens", "cu_seqlens")


def element_bounds(role: str, cfg: Config, vocab_size: int | None) -> tuple[int, int] | str | None:
    """The inclusive element bounds a contract gets for a list column of ``role``.

    Returns:
        ``(lo, hi)`` from the facts: ids of the vocabulary (``input_ids``, tokenized ``chosen`` /
        ``rejected``) ``(0, vocab_size - 1)``; token ``labels`` the same with ``lo`` lowered to
        ``[labels] ignore_index`` (-100 by default); ``token_type_ids`` ``(0, type_vocab_size - 1)``;
        ``position_ids`` ``(0, max_position_embeddings - 1)``; masks ``(0, 1)``. A string (the
        note to print) when the role has such bounds but the fact is unset: the bounds are left
        out. None for a column of no such role: the observed range is used.
    """
    if role in _FLAG_ROLES:
        return (0, 1)
    if role in _VOCAB_ROLES or role == "labels":
        if vocab_size is None:
            return ("token ids: element bounds left out; set [tokens] vocab_size or pass --tokenizer to bound "
                    "them by [0, vocab_size) (the observed range would fail the next shard with a rarer token)")
        ignore = cfg.labels.ignore if role == "labels" else None
        return (min(0, ignore) if ignore is not None else 0, vocab_size - 1)
    if role == "token_type_ids":
        n = cfg.tokens.type_vocab_size
        return (0, n - 1) if n else "element bounds left out; set [tokens] type_vocab_size to bound them"
    if role == "position_ids":
        n = cfg.tokens.max_position_embeddings
        return (0, n - 1) if n else "element bounds left out; set [tokens] max_position_embeddings to bound them"
    if role in _UNBOUNDED_ROLES:
        return "element bounds left out (they depend on how the rows are packed)"
    return None


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _shard_stats(lf: pl.LazyFrame, schema: dict[str, pl.DataType], label: str | None) -> dict[str, dict[str, Any]]:
    exprs: list[pl.Expr] = [pl.len().alias("__n")]
    for i, (c, t) in enumerate(schema.items()):
        col = pl.col(c)
        exprs.append(col.null_count().alias(f"n{i}"))
        inner = inner_dtype(t)
        if is_list(t):
            depth = 0
            tt = t
            while isinstance(tt, (pl.List, pl.Array)):
                depth += 1
                tt = tt.inner  # type: ignore[assignment]
            L = col.list.len() if not isinstance(t, pl.Array) else col.arr.len()
            exprs += [L.min().alias(f"lmin{i}"), L.max().alias(f"lmax{i}")]
            if inner.is_numeric():
                el = col
                for _ in range(depth):  # every element, at any nesting depth
                    el = el.explode()
                if inner.is_float():
                    el = el.filter(el.is_finite())
                exprs += [el.min().alias(f"emin{i}"), el.max().alias(f"emax{i}")]
        elif c == label and (t.is_integer() or t == pl.String or isinstance(t, (pl.Categorical, pl.Enum))):
            exprs.append(col.drop_nulls().cast(pl.String if not t.is_integer() else t).unique().head(MAX_CLASSES + 1)
                         .implode().alias(f"cls{i}"))
            if t.is_integer():
                exprs += [col.min().alias(f"min{i}"), col.max().alias(f"max{i}")]
        elif t.is_numeric():
            v = col.filter(col.is_finite()) if t.is_float() else col
            exprs += [v.min().alias(f"min{i}"), v.max().alias(f"max{i}")]
    row = lf.select(exprs).collect().row(0, named=True)
    out: dict[str, dict[str, Any]] = {"__rows": {"n": row["__n"]}}
    names = list(schema)
    for c in names:
        out[c] = {}
    for k, v in row.items():
        if k == "__n":
            continue
        stat = k.rstrip("0123456789")
        out[names[int(k[len(stat):])]][stat] = _py(v)
    return out


def _merge(a: Any, b: Any, how: str) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b) if how == "min" else max(a, b)


def infer_config(cfg: Config | None = None, tokenizer: str | None = None) -> Config:
    """The config ``schema infer`` reads the shards with: ``cfg`` with the facts of a tokenizer filled
    where ``[tokens]`` leaves them unset (the vocabulary size and the pad/eos/bos ids its files
    declare, :func:`datacheck.derive.tokenizer.tokenizer_facts`), as the audit fills them: so the
    bounds of id columns, the layout and the evidence it is told by (padding ids are no hidden
    prompt) are the audit's.

    Args:
        cfg: the config (defaults when None).
        tokenizer: a tokenizer file or folder (``--tokenizer``), taken instead of ``[tokens]
            tokenizer``; None: ``[tokens] tokenizer``, if set.

    Raises:
        UsageError: the tokenizer cannot be loaded; ConfigError: ``[tokens] vocab_size`` is smaller
            than the tokenizer's count; OptionalDependencyError: no ``tokenizers`` package.
    """
    cfg = cfg or Config()
    if tokenizer is None:
        return with_tokenizer_facts(cfg)
    facts = tokenizer_facts(tokenizer, tokenizer)
    return cfg.with_tokenizer_facts(facts.vocab_size, facts.ids, facts.source)


def infer_contract(paths: list[str], cfg: Config | None = None, name: str = "inferred",
                   vocab_size: int | None = None, *,
                   progress: Callable[[str, int, int], None] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Infer a contract from the shards under ``paths``.

    Args:
        paths: shard files, folders or globs (as ``datacheck audit`` takes them).
        cfg: the config (format, csv options, ``[columns]`` roles, ``[tokens]``/``[labels]``
            facts for the bounds of id columns); defaults when None.
        name: the schema's ``name``.
        vocab_size: the vocabulary size when ``[tokens] vocab_size`` is unset (e.g. a tokenizer's
            largest id + 1, :attr:`datacheck.derive.tokenizer.TokenizerView.vocab_size`); ``[tokens]
            vocab_size`` wins when set.
        progress: called as ``progress(shard path, shards done, shards)`` before each shard is read.

    Returns:
        (the contract as a mapping in Pandera's polars form plus ``datacheck:``, notes for the user:
        shards that could not be read, columns whose dtype differs between shards or is one the
        contract cannot name (Int128: the column is kept without dtype or range), the integer role
        columns holding values beyond 64 bits (read at Int64's bounds,
        :func:`datacheck.model.roles.cast_expr`: their observed classes or range are left out, a
        bound is no value of the data), the columns
        rendered by ``[tokens] tokenizer`` that were left out). The contract holds the columns of
        the data as the audit reads them, except those the read path renders with a tokenizer's
        chat template (``input_ids``/``assistant_mask``/``labels``, ``chat_template_error``,
        ``chat_assistant_tokens_untruncated``, the pair columns ``chosen_input_ids`` ...): the
        data does not hold them and an audit without the tokenizer has none. The ``messages``
        column derived from the Alpaca layout stays: the read path derives it with or without a
        tokenizer.

    Raises:
        UsageError: no shard found, or none readable.
    """
    import pandera.io.polars_io as pio
    import pandera.polars as pa


    cfg = infer_config(cfg)  # [tokens] tokenizer's facts, as the audit takes them
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    notes: list[str] = []
    dtypes: dict[str, list[pl.DataType]] = {}
    stats: dict[str, dict[str, Any]] = {}
    present: dict[str, int] = {}
    role_of: dict[str, str] = {}  # list column -> the role whose element bounds it gets
    vocab = cfg.tokens.vocab_size if cfg.tokens.vocab_size is not None else vocab_size
    label: str | None = None
    rows = shards = 0
    rendered: list[str] = []
    clipped: list[str] = []  # role columns with values beyond 64 bits (read at Int64's bounds)
    for k, ds in enumerate(disc.shards):
        if progress is not None:
            progress(ds.rel, k, len(disc.shards))
        try:
            data = open_for_checks(ds, cfg)  # as the audit reads it: a contract it writes must fit the audit
            roles = data.roles
            # every derived column but the Alpaca messages is the tokenizer's rendering
            made = [c for c in roles.derived if c != "messages"]
            rendered += [c for c in made if c not in rendered]
            schema = {c: t for c, t in data.schema.items() if c not in made}
            label = label or roles.label
            for role in (*_VOCAB_ROLES, "labels", *_FLAG_ROLES, "token_type_ids", "position_ids", *_UNBOUNDED_ROLES):
                for c in roles.of(role):
                    role_of.setdefault(c, role)
            st = _shard_stats(data.lf, schema, roles.label)
            clipped += [c for c in data.casts if c not in clipped and _at_int64_bounds(st.get(c, {}))]
        except MemoryError:
            raise OutOfMemory.decoding(ds.rel) from None
        except Unreadable as exc:
            OutOfMemory.check(exc, ds.rel)
            notes.append(f"{ds.rel}: not read ({exc.reason})")
            continue
        except pl.exceptions.PolarsError as exc:
            notes.append(f"{ds.rel}: not read ({str(exc).splitlines()[0]})")
            continue
        shards += 1
        rows += st.pop("__rows")["n"]
        for c, t in schema.items():
            dtypes.setdefault(c, [])
            if t not in dtypes[c]:
                dtypes[c].append(t)
            present[c] = present.get(c, 0) + 1
            cur = stats.setdefault(c, {"n": 0})
            s = st[c]
            cur["n"] += s.get("n", 0)
            for k in ("lmin", "emin", "min"):
                if k in s:
                    cur[k] = _merge(cur.get(k), s[k], "min")
            for k in ("lmax", "emax", "max"):
                if k in s:
                    cur[k] = _merge(cur.get(k), s[k], "max")
            if "cls" in s:
                cur["cls"] = sorted(set(cur.get("cls", [])) | set(s["cls"] or []), key=lambda v: (str(type(v)), v))
    if shards == 0:
        raise UsageError("no readable shard to infer a schema from: " + "; ".join(notes or [str(p) for p in paths]))
    if rendered:
        notes.append(f"columns rendered by [tokens] tokenizer left out of the contract: {', '.join(rendered)} (the "
                     "data does not hold them; the audit renders them when a tokenizer is configured)")
    columns: dict[str, Any] = {}
    rules: dict[str, dict[str, Any]] = {}
    for c, ts in dtypes.items():
        s = stats[c]
        t = ts[0] if len(ts) == 1 else None
        if t is None:
            notes.append(f"column {c!r} has different dtypes across shards ({', '.join(map(str, ts))}): dtype left out")
        checks = []
        if c in clipped:
            notes.append(f"column {c!r} holds integers beyond 64 bits, which the audit reads at Int64's bounds "
                         f"({INT64_MIN}, {INT64_MAX}): observed classes and range left out")
            s = {k: v for k, v in s.items() if k not in ("cls", "min", "max", "emin", "emax")}
        if "cls" in s and s["cls"] and len(s["cls"]) <= MAX_CLASSES:
            checks.append(pa.Check.isin(list(s["cls"])))
        elif s.get("min") is not None and s.get("max") is not None:
            checks.append(pa.Check.in_range(s["min"], s["max"]))
        try:
            columns[c] = pa.Column(t, nullable=s["n"] > 0, required=present[c] == shards, checks=checks or None)
        except TypeError:  # a dtype Pandera's polars engine cannot name (Int128: a CSV integer beyond Int64)
            notes.append(f"column {c!r} is {t}, a dtype the contract (Pandera's polars engine) cannot name: "
                         "dtype and observed range left out")
            columns[c] = pa.Column(None, nullable=s["n"] > 0, required=present[c] == shards)
        if any(k in s for k in ("lmin", "emin")):
            r: dict[str, Any] = {}
            for src, dst in (("lmin", "min_length"), ("lmax", "max_length"), ("emin", "min_value"), ("emax", "max_value")):
                if s.get(src) is not None:
                    r[dst] = s[src]
            bounds = element_bounds(role_of[c], cfg, vocab) if c in role_of and "emin" in s else None
            if bounds is not None:
                r.pop("min_value", None)
                r.pop("max_value", None)
                if isinstance(bounds, tuple):
                    r["min_value"], r["max_value"] = bounds
                else:
                    notes.append(f"column {c!r} ({role_of[c]}): {bounds}")
            if r:
                rules[c] = r
    schema = pa.DataFrameSchema(columns, name=name, description=(
        f"inferred by datacheck schema infer from {shards} shard(s), {rows} row(s); edit and commit"))
    out = pio.serialize_schema(schema)
    out.pop("version", None)  # the pandera version that wrote it; not part of the contract
    if rules:
        out["datacheck"] = {"version": CONTRACT_FORMAT_VERSION, "columns": rules}
    contract_from_dict(out, "inferred schema")  # it must load back (raises ConfigError otherwise)
    return out, notes


def _at_int64_bounds(stats: dict[str, Any]) -> bool:
    """Whether a cast column's observed values (classes, range, element range) reach Int64's bounds:
    the read path cast it from 128-bit integers (the other casts of an integer role are of
    all-null columns, which hold no value), so a value there stands for one beyond 64 bits."""
    vals = [stats.get(k) for k in ("min", "max", "emin", "emax")] + list(stats.get("cls") or [])
    return any(isinstance(v, int) and not isinstance(v, bool) and v in (INT64_MIN, INT64_MAX) for v in vals)


def infer_yaml(data: dict[str, Any], sources: list[str], proposal: LayoutProposal | None = None) -> str:
    """The inferred contract as commented YAML text (what ``datacheck schema infer`` writes); with
    ``proposal``, the recognized built-in layout and the proposed ``datacheck.toml`` lines as comments."""
    import yaml

    lay = ""
    if proposal is not None:
        lay = (f"# layout: {proposal.layout or 'none'} ({proposal.why})\n"
               + ("" if proposal.layout is None else
                  f"#   the built-in layout holds what every such dataset needs: [dataset] schema = \"{proposal.layout}\"\n")
               + "".join(f"#   {line}\n" for line in proposal.toml().splitlines() if proposal.layout is not None
                         or not line.startswith(("[dataset]", "schema")))
               + "".join(f"#   note: {x}\n" for x in proposal.notes))
    head = (f"# datacheck data contract, inferred {_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()}\n"
            f"# from: {', '.join(sources)}\n"
            "# Pandera polars schema form (pandera.io.polars_io), plus datacheck's list rules under `datacheck:`.\n"
            "# Ranges and classes are what was observed (id and mask columns: from the vocabulary and the\n"
            "# [tokens] facts, or left out): widen them where new data may legitimately differ.\n" + lay)
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# --------------------------------------------------------------------------------------------- layouts
#: Rows of the first readable shard read to decide what the schema alone cannot (whether position ids
#: reset, whether labels hide a prompt, label shift, padding side, end-of-turn id).
SAMPLE_ROWS = 1000
#: Share of the supervised positions of the sample on which labels must equal ``input_ids`` (unshifted)
#: or ``input_ids`` one position later (shifted) for ``[labels] shifted`` to be proposed: 90%, the
#: threshold of ``labels.shift_mismatch`` (CHECKS.md).
SHIFT_AGREEMENT = 0.9
#: Share of the sample's rows whose last supervised label is the same id for that id to be proposed as
#: ``[tokens] eot_token_ids`` (the token that ends every response).
EOT_AGREEMENT = 0.9
#: Hugging Face audio feature columns: raw waveform (wav2vec2) and log-mel frames (Whisper, conformers).
AUDIO_FEATURES = ("input_values", "input_features")
#: Columns that hold per-row encoder frame counts in CTC data (HF examples write ``input_length``).
INPUT_LENGTH_NAMES = ("input_lengths", "input_length", "num_frames")
#: Conversation columns: TRL/OpenAI ``messages`` ({role, content}) and ShareGPT ``conversations`` ({from, value}).
CHAT_NAMES = ("messages", "conversations")
#: Columns that delimit the documents of a packed row (CHECKS.md, packing).
PACKING_ROLES = ("document_ids", "seq_lens", "cu_seqlens", "position_ids")


@dataclass(frozen=True)
class LayoutProposal:
    """What ``datacheck schema infer`` proposes for the data: a built-in layout, the roles, the facts.

    Attributes:
        layout: a built-in layout name (:data:`datacheck.contracts.load.LAYOUTS`), or None when none fits.
        why: the evidence, in words (column names and dtypes, and what the sample showed).
        columns: ``[columns]`` role -> column name (or names) the layout's checks use.
        facts: config section -> key -> value, decided from the data (never an observed token-id
            minimum or maximum: a bound must come from the tokenizer, not from the data it judges).
        notes: what the user must still decide (facts the data cannot tell, ambiguities).
        sample_rows: rows of the first shard the facts were decided on (at most :data:`SAMPLE_ROWS`).
        rows: the layout ``datacheck audit`` recognizes the rows as (:func:`datacheck.derive.layout.recognize`
            on the same sample; the checks outside it do not apply), or None. It may be finer than
            ``layout`` (the built-in contract): packed SFT rows are ``packed_lm`` data to a contract.
    """

    layout: str | None
    why: str
    columns: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    sample_rows: int = 0
    rows: Layout | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"layout": self.layout, "why": self.why, "columns": dict(self.columns),
                "facts": {s: dict(kv) for s, kv in self.facts.items()}, "notes": list(self.notes),
                "sample_rows": self.sample_rows}

    def gives_rows(self) -> bool:
        """Whether the proposed config alone makes the audit take the rows as :attr:`rows`: its
        ``[dataset] schema`` names that layout, or one the audit refines into it
        (:data:`datacheck.derive.layout.REFINES`, the rule of :func:`~datacheck.derive.layout.shard_layout`);
        then no ``[dataset] layout`` line is needed."""
        return (self.rows is not None and self.rows.name is not None and self.layout is not None
                and (self.rows.name == self.layout or self.rows.name in REFINES.get(self.layout, frozenset())))

    def toml(self) -> str:
        """The proposal as ``datacheck.toml`` text (``[dataset] schema``, ``[columns]``, the facts)."""
        import json

        def val(v: Any) -> str:
            return json.dumps(v) if not isinstance(v, bool) else str(v).lower()

        out: list[str] = []
        if self.layout is not None:
            out += ["[dataset]", f"schema = {val(self.layout)}"]
        if self.columns:
            out += ["[columns]"] + [f"{k} = {val(v)}" for k, v in self.columns.items()]
        for section, kv in self.facts.items():
            out += [f"[{section}]"] + [f"{k} = {val(v)}" for k, v in kv.items()]
        return "\n".join(out) + ("\n" if out else "")


def _list_of(t: pl.DataType | None, pred: Any) -> bool:
    return t is not None and is_list(t) and pred(inner_dtype(t))


def _int_list(t: pl.DataType | None) -> bool:
    return _list_of(t, lambda d: d.is_integer()) and list_depth(t) == 1  # type: ignore[arg-type]


def _struct_list(t: pl.DataType | None) -> bool:
    return _list_of(t, lambda d: isinstance(d, pl.Struct))


def _form(t: pl.DataType) -> str:
    if _struct_list(t):
        return "conversation (list of structs)"
    if _int_list(t):
        return "token ids"
    return "text" if t == pl.String else str(t)


def _padding_side(df: pl.DataFrame, mask: str) -> tuple[str | None, str | None]:
    """(padding side, note) from the sample: left when some row is padded on the left only and none on
    the right only, right when the converse; None when no row is padded or both occur."""
    side, first0, last0 = padding_side_of(df, mask)
    if side is not None:
        return side, None
    if first0 and last0:
        return None, (f"{mask}: {first0} sample row(s) are padded on the left only and {last0} on the right only; "
                      "set [tokens] padding_side yourself")
    return None, None


def _label_facts(df: pl.DataFrame, ids: str, labels: str, ignore: int | None,
                 mask: str | None = None, pad: int | None = None) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """Facts from the sample's labels: the ignore sentinel when it is not -100, ``shifted``, and the
    end-of-turn id (the last supervised label of nearly every row), both read at the positions
    ``mask`` attends only (in a row without a mask of its length, the ids other than ``pad``,
    ``[tokens] pad_token_id``: all of them when None). Also evidence for the caller:
    ``prompt_hidden`` of ``prompt_rows`` (rows whose ignored labels sit on tokens ``mask`` attends
    before the first supervised one, of the rows judged; the recognizer's count,
    :func:`datacheck.derive.layout.hidden_prompts`: a row whose mask is all 0 hides nothing)."""
    facts: dict[str, Any] = {}
    notes: list[str] = []
    ev: dict[str, Any] = {"prompt_hidden": 0}
    neg = sorted(int(v) for v in df[labels].explode().drop_nulls().unique().to_list() if v is not None and v < 0)
    sentinel = ignore
    if len(neg) == 1 and neg[0] != ignore:
        facts["ignore_index"] = sentinel = neg[0]
    elif len(neg) > 1:
        notes.append(f"{labels} holds several negative values {neg[:5]}: set [labels] ignore_index to the one your "
                     "loss ignores (labels.unexpected_sentinel reports the others)")
    same = nxt = sup = 0
    ends: dict[int, int] = {}
    rows_sup = 0
    masks = df[mask].to_list() if mask is not None and mask in df.columns else [None] * df.height
    for a, b, m in zip(df[ids].to_list(), df[labels].to_list(), masks):
        if a is None or b is None or len(a) != len(b):
            continue
        # only attended positions (mask not 0, or a row without a mask of its length): labels padded
        # with the pad id under padding ids once read as labels = ids (shifted false) at any width
        att = m if isinstance(m, list) and len(m) == len(a) else [pad is None or x != pad for x in a]
        pos = [i for i, v in enumerate(b) if v is not None and v != sentinel and att[i]]
        if not pos:
            continue
        rows_sup += 1
        ends[b[pos[-1]]] = ends.get(b[pos[-1]], 0) + 1
        for i in pos:
            sup += 1
            same += b[i] == a[i]
            nxt += i + 1 < len(a) and b[i] == a[i + 1]
    if sup:
        if same >= SHIFT_AGREEMENT * sup:
            facts["shifted"] = False
        elif nxt >= SHIFT_AGREEMENT * sup:
            facts["shifted"] = True
        else:
            notes.append(f"{labels} match input_ids on {same}/{sup} supervised sample positions and the next id on "
                         f"{nxt}/{sup}: set [labels] shifted yourself")
    ev["ends"] = ends
    ev["rows_supervised"] = rows_sup
    ev["prompt_hidden"], ev["prompt_rows"] = hidden_prompts(df, ids, labels, mask, sentinel, pad)
    return facts, notes, ev


def propose_layout(paths: list[str], cfg: Config | None = None) -> LayoutProposal:
    """Recognize the built-in layout of the shards under ``paths`` and propose its roles and facts
    (:func:`_propose`), with ``rows``: the layout the audit recognizes the rows as."""
    seen: list[Layout] = []
    p = _propose(paths, cfg, seen)
    return replace(p, rows=seen[0]) if seen else p


def _propose(paths: list[str], cfg: Config | None, seen: list[Layout]) -> LayoutProposal:
    """Recognize the built-in layout of the shards under ``paths`` and propose its roles and facts.

    The layout is decided from the first readable shard's column names and dtypes, read as the audit
    reads it (:func:`datacheck.derive.read.open_for_checks`), in this order:

    - ``dpo``: ``chosen`` and ``rejected`` columns (text, conversations or token ids);
    - ``ctc``: a float-list audio feature column (:data:`AUDIO_FEATURES`) and integer-list ``labels``;
    - ``chat_sft``: a list-of-struct ``messages`` or ``conversations`` column;
    - ``packed_lm``: ``input_ids`` with ``document_ids``, ``seq_lens`` or ``cu_seqlens``, or with
      ``position_ids`` that reset to 0 inside a row of the sample;
    - ``sft_tokenized``: ``input_ids`` and integer-list ``labels``, with an ``assistant_mask(s)``
      column or labels that ignore attended tokens before the first supervised one in some sample row
      (a hidden prompt);
    - ``seq2seq`` (decoder columns, or rows the audit's recognizer takes for encoder-decoder rows:
      :func:`datacheck.derive.layout.recognize`), ``token_classification`` (``tokens`` + a tag column),
      ``text_classification`` (``input_ids`` and a class ``label``, no token ``labels``: an encoder's
      classification rows), ``causal_lm`` (``input_ids``), ``text_classification`` (a text column and
      a class label), ``raw_text`` (text and no other role: the audit's recognizer),
      ``tabular`` (numeric columns only, with a target name).

    Facts come from the first :data:`SAMPLE_ROWS` rows of that shard: ``padding_side`` (where the
    mask's zeros are), ``ignore_index`` (a single negative label other than -100), ``shifted``
    (labels equal to ``input_ids`` or to the next id on at least :data:`SHIFT_AGREEMENT` of the
    supervised positions), ``eot_token_ids`` (the last supervised label of at least
    :data:`EOT_AGREEMENT` of the rows). No token-id range is proposed from the data.

    Args:
        paths: shard files, folders or globs.
        cfg: the config (format, CSV options, ``[columns]``); defaults when None.

    Returns:
        The :class:`LayoutProposal` (``layout`` None when no built-in layout fits).

    Raises:
        UsageError: no shard found, or none readable.
    """
    cfg = infer_config(cfg)  # [tokens] tokenizer's facts (the pad id), as the audit's recognizer takes them
    disc = discover([str(p) for p in paths], cfg.dataset.format)
    data = None
    reasons: list[str] = []
    for ds in disc.shards:
        try:
            data = open_for_checks(ds, cfg)
            df = data.lf.head(SAMPLE_ROWS).collect()
            break
        except MemoryError:
            raise OutOfMemory.decoding(ds.rel) from None
        except Unreadable as exc:
            OutOfMemory.check(exc, ds.rel)
            reasons.append(f"{ds.rel}: {exc.reason}")
        except pl.exceptions.PolarsError as exc:
            reasons.append(f"{ds.rel}: {str(exc).splitlines()[0]}")
    if data is None or not disc.shards or (reasons and len(reasons) == len(disc.shards)):
        raise UsageError("no readable shard to recognize a layout in: " + "; ".join(reasons or [str(p) for p in paths]))
    schema, roles = data.schema, data.roles
    n = df.height
    seen.append(recognize(schema, roles, lambda cols: df.select([c for c in cols if c in df.columns]),
                          cfg.labels.ignore, cfg.sft.response_template_ids is not None, cfg.tokens.pad_token_id,
                          cfg.tokens.eos_token_id))
    cols: dict[str, Any] = {}
    facts: dict[str, dict[str, Any]] = {}
    notes: list[str] = []

    def fact(section: str, key: str, value: Any) -> None:
        facts.setdefault(section, {})[key] = value

    def role(name: str, col: str) -> None:
        cols[name] = col

    ids = roles.input_ids if roles.input_ids in schema and _int_list(schema[roles.input_ids]) else None
    labels = roles.labels if roles.labels is not None and _int_list(schema.get(roles.labels)) else None
    mask = roles.attention_mask

    def token_facts(section_labels: bool = True) -> dict[str, Any]:
        ev: dict[str, Any] = {}
        if mask is not None and is_list(schema[mask]) and n:
            side, note = _padding_side(df, mask)
            if side is not None:
                fact("tokens", "padding_side", side)
            if note:
                notes.append(note)
        if ids is not None and labels is not None and n and section_labels:
            lf_, ln, ev = _label_facts(df, ids, labels, cfg.labels.ignore, mask, cfg.tokens.pad_token_id)
            for k, v in lf_.items():
                fact("labels", k, v)
            notes.extend(ln)
        return ev

    def eot(ev: dict[str, Any]) -> None:
        ends, rows_sup = ev.get("ends") or {}, ev.get("rows_supervised", 0)
        if ends and rows_sup:
            top, cnt = max(ends.items(), key=lambda kv: kv[1])
            if cnt >= EOT_AGREEMENT * rows_sup:
                fact("tokens", "eot_token_ids", [int(top)])
            else:
                notes.append(f"the last supervised label differs between rows (most common {top} in {cnt}/{rows_sup}): "
                             "set [tokens] eot_token_ids to your end-of-turn id(s)")

    chosen = roles.chosen or ("chosen" if "chosen" in schema else None)
    rejected = roles.rejected or ("rejected" if "rejected" in schema else None)
    audio = [c for c in AUDIO_FEATURES if _list_of(schema.get(c), lambda d: d.is_float())]
    chat = ([roles.messages] if roles.messages is not None and _struct_list(schema.get(roles.messages)) else
            [c for c in CHAT_NAMES if _struct_list(schema.get(c))])
    packers = [r for r in PACKING_ROLES if roles.has(r)]
    if chosen and rejected:
        role("chosen", chosen)
        role("rejected", rejected)
        forms = {_form(schema[chosen]), _form(schema[rejected])}
        why = f"preference pairs: {chosen!r} and {rejected!r} ({', '.join(sorted(forms))})"
        if "prompt" in schema:
            why += ", with a 'prompt' column"
        if chat:
            why += f", with a shared conversation prompt {chat[0]!r}"
        if "token ids" in forms:
            notes.append("token-id pairs are compared after truncation: set [tokens] max_seq_len and truncation_side")
        return LayoutProposal("dpo", why, cols, facts, tuple(notes), n)
    if audio and labels is not None:
        role("labels", labels)
        lens = [c for c in INPUT_LENGTH_NAMES if c in schema and schema[c].is_integer()]
        if lens:
            role("input_lengths", lens[0])
        else:
            notes.append(f"no per-row frame count ({', '.join(INPUT_LENGTH_NAMES)}): length.ctc_infeasible is skipped "
                         "until [columns] input_lengths names one")
        notes.append("set [labels] ctc_downsample to your encoder's input frames per output step (default 1)")
        return LayoutProposal("ctc", f"CTC: audio features {audio[0]!r} ({schema[audio[0]]}) and {labels!r} "
                                     f"(integer lists)", cols, facts, tuple(notes), n)
    if chat:
        c = chat[0]
        role("messages", c)
        fields = [f.name for f in inner_dtype(schema[c]).fields]  # type: ignore[attr-defined]
        style = ("ShareGPT {from, value}" if {"from", "value"} <= set(fields) else
                 "{role, content}" if {"role", "content"} <= set(fields) else f"fields {fields}")
        notes.append("set [tokens] tokenizer to a tokenizer folder with a chat template to render and judge the "
                     "tokenized conversations (sft.*)")
        return LayoutProposal("chat_sft", f"chat conversations: {c!r} is a list of {style} structs", cols, facts,
                              tuple(notes), n)
    if ids is not None:
        role("input_ids", ids)
        if labels is not None:
            role("labels", labels)
        if mask is not None:
            role("attention_mask", mask)
        resets = 0
        if roles.position_ids is not None and _int_list(schema[roles.position_ids]) and n:
            resets = int(df.select(pl.col(roles.position_ids).list.slice(1).list.eval(pl.element() == 0).list.any()
                                   .sum()).item() or 0)
        delim = [r for r in packers if r != "position_ids"] + (["position_ids"] if resets else [])
        if delim:
            for r in packers:
                role(r, getattr(roles, r))
            ev = token_facts()
            why = "packed rows: documents from " + ", ".join(repr(getattr(roles, r)) for r in delim)
            if resets:
                why += f" (position ids reset inside {resets} of {n} sample rows)"
            if ev.get("prompt_hidden"):
                notes.append(f"{ev['prompt_hidden']} sample row(s) also hide a prompt from the loss (packed SFT): "
                             "the sft.* rules apply too")
            return LayoutProposal("packed_lm", why, cols, facts, tuple(notes), n)
        amask = roles.assistant_mask or next((c for c in ("assistant_masks",) if _int_list(schema.get(c))), None)
        if labels is not None:
            ev = token_facts()
            if seen and seen[0].name == "masked_lm" and amask is None:  # the recognizer's rule, as the audit reads them
                notes.append("no built-in contract: masked-LM rows (DataCollatorForLanguageModeling(mlm=True) output) "
                             "hide most positions from the loss by design; the audit judges them as masked_lm (a row "
                             "with no masked position is no finding), and the contract below holds their columns")
                return LayoutProposal(None, seen[0].why, cols, facts, tuple(notes), n)
            if amask is not None or ev.get("prompt_hidden"):
                if amask is not None:
                    role("assistant_mask", amask)
                eot(ev)
                why = (f"tokenized SFT: {ids!r} and {labels!r}"
                       + (f" with assistant mask {amask!r}" if amask is not None else "")
                       + (f"; {ev['prompt_hidden']} of {ev['prompt_rows']} sample rows ignore attended tokens before the first "
                          "supervised one (a prompt hidden from the loss)" if ev.get("prompt_hidden") else ""))
                return LayoutProposal("sft_tokenized", why, cols, facts, tuple(notes), n)
        else:
            token_facts(False)
        # decoder columns, or what the audit's recognizer saw (labels of their own length: decoder targets)
        dec = seq2seq_layout(None, schema) or (seen[0].why if seen and seen[0].name == "seq2seq" else None)
        if dec is not None:
            return LayoutProposal("seq2seq", f"encoder-decoder: {dec}", cols, facts, tuple(notes), n)
        if roles.token_type_ids is not None:
            role("token_type_ids", roles.token_type_ids)
        if roles.label is not None:
            role("label", roles.label)
            if labels is None:  # an encoder's ids and one class per row: the classification contract
                return LayoutProposal("text_classification", f"token ids {ids!r} and class label {roles.label!r}"
                                      + (f" with mask {mask!r}" if mask else ""), cols, facts, tuple(notes), n)
        why = f"token ids {ids!r}" + (f" and labels {labels!r}" if labels else "") + (f" with mask {mask!r}" if mask else "")
        if mask is None:  # the causal_lm contract requires an attention_mask: it would fail these rows
            notes.append("no built-in contract: causal_lm requires an attention_mask, which these rows do not have "
                         "(unpadded rows, as Megatron and nanoGPT store them, need none); the audit judges them as "
                         "causal-LM rows all the same, and the contract below holds their columns")
            return LayoutProposal(None, why, cols, facts, tuple(notes), n)
        return LayoutProposal("causal_lm", why, cols, facts, tuple(notes), n)
    if roles.aligned and roles.labels is not None:
        role("labels", roles.labels)
        return LayoutProposal("token_classification", f"words and tags: aligned {list(roles.aligned[0])}",
                              cols, facts, tuple(notes), n)
    if roles.text and roles.label is not None:
        role("text", list(roles.text))
        role("label", roles.label)
        return LayoutProposal("text_classification", f"text {list(roles.text)} and class label {roles.label!r}",
                              cols, facts, tuple(notes), n)
    if seen and seen[0].name == "raw_text":  # the audit's rule: text and no other role
        role("text", list(roles.text))
        return LayoutProposal("raw_text", seen[0].why, cols, facts, tuple(notes), n)
    num = [c for c, t in schema.items() if inner_dtype(t).is_numeric() or inner_dtype(t) == pl.Boolean]
    target = [c for c in ("target", "targets", "label", "y") if c in schema]
    if schema and len(num) == len(schema) and target:
        return LayoutProposal("tabular", f"numeric columns only, target {target[0]!r}", cols, facts, tuple(notes), n)
    return LayoutProposal(None, "no built-in layout fits the columns " + ", ".join(f"{c} ({t})" for c, t in schema.items()),
                          cols, facts, tuple(notes), n)
