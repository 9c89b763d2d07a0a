"""The layout of a shard (:mod:`datacheck.model.layouts`): given, or recognized from its columns and a
sample of its rows. ``datacheck audit`` decides it once per shard (the checks outside it do not
apply); ``datacheck schema infer`` proposes it with the same rules (:func:`recognize`).

Order of the rules (the first that fits decides; column dtypes from the schema, values from the
first :data:`SAMPLE_ROWS` rows, read only when a rule needs them):

1. ``dpo``: ``chosen`` and ``rejected`` roles;
2. ``kto``: a ``completion`` (or TRL's tokenized ``completion_input_ids``) column and a Boolean ``label``
   column (TRL's unpaired preference form);
3. ``ctc``: a float-list audio feature column (:data:`AUDIO_FEATURES`) and integer-list ``labels``;
4. ``chat_sft``: a list-of-struct ``messages`` role (``messages`` / ``conversations``);
5. token ids (``input_ids``, an integer list):

   - ``seq2seq``: a decoder column, or ``labels`` of another length than ``input_ids`` in every sample
     row, or in some rows and unlike the ids in the others (labels equal to the ids where the lengths
     agree: unsure, a ``length.mismatch`` defect or decoder targets); labels of the ids' length are
     decoder targets padded to the encoder's length (T5's ``padding="max_length"``) when they agree
     with neither the ids nor the next ids, are no tags, and in at least :data:`AGREEMENT` of the
     sample rows are one run from position 0 that is neither inside the row's ids nor some row's
     ids, of another length than the attended ids in at least half of them (:func:`_decoder_targets`);
   - packed (``document_ids``, ``seq_lens`` or ``cu_seqlens``, or ``position_ids`` that reset to 0
     inside a sample row): ``packed_sft`` when some document's labels ignore more than its first
     token (a prompt hidden from the loss), else ``packed_lm``;
   - with integer-list ``labels``: ``token_classification`` when the supervised labels are small
     class ids (below :data:`MAX_TAG_ID` and equal to the id or the next id on under
     :data:`AGREEMENT` of the supervised positions); ``sft_tokenized`` when the labels equal the ids
     (or the next ids) on at least :data:`AGREEMENT` of them and an ``assistant_mask`` column exists
     or some sample row ignores attended tokens before its first supervised one; ``causal_lm`` when
     the labels equal the ids and some row is padded (a 0 in ``attention_mask``; without a mask, a
     run of ``[tokens] pad_token_id`` at one end of a row, of 2+ ids when it equals the eos id) or
     the rows differ in length; ``packed_lm`` when every sample row is unpadded and of one length (``group_texts``);
     unknown (unsure) when the labels match neither; but first ``masked_lm`` when one id (the mask
     token) holds most supervised positions and almost no unsupervised one (pre-masked masked-LM
     rows: :func:`_masked_positions`; with labels small enough to be tags, only when the labels also
     equal the ids on :data:`MASKED_KEPT` of the other supervised positions, as the collator's
     unchanged 10% do);
   - without ``labels``: ``text_classification`` with a class ``label`` column or a ``target`` (a
     multi-label vector of floats, a regression score: an answer per row, not per token); ``sft_tokenized``
     with an ``assistant_mask`` (the collator makes the labels from it: TRL's ``assistant_only_loss``
     over ``apply_chat_template``'s ``assistant_masks``); else
     ``causal_lm`` (padded or of varying length) or ``packed_lm`` (one length, no padding);
6. ``token_classification``: aligned word and tag lists;
7. ``text_classification`` (text and a class label) or ``regression`` (text or features and a
   ``target`` role, given in ``[columns] target`` or a float ``label``, or a float ``target``/``score``
   column);
8. ``tabular``: numeric columns (or lists of numbers) only, with a class label (``label``, or an
   integer or Boolean ``target``/``targets``/``y``: :data:`datacheck.model.roles.CLASS_TARGET_NAMES`;
   ``regression`` when a ``target`` role or a target-named column is a float);
9. ``raw_text``: a text role and no other role (no label of any kind, no token ids, conversations,
   pairs, features or aligned lists, inferred or given), and no other column named like a label or
   target (``coarse_label``, ``class``, ``score``, a numeric ``label_name``: unknown, asking for ``[columns] label``): a corpus
   before tokenization, its other columns metadata (``url``, ``id``, ``timestamp``, a WebDataset
   sample's ``__key__``).

No rule fits: the layout is unknown, with the columns in the reason.

A role ``[columns]`` declares but the shard lacks (``schema.missing_column``, e.g. a mistyped
``input_ids = "ids"`` over a shard whose ids are in ``input_ids``) never makes a layout of what is
left (the token rows were "tabular, numeric columns only" and 33 token checks did not apply): a
column of the role's standard name that serves it is read in its place, as if the key were unset
(role resolution does it: :func:`datacheck.model.roles.stand_in_column`, ``Roles.stand_ins``; the
checks read it too), and the reason says so; with none, a token, conversation or pair role lost
leaves the layout unknown (unsure) rather than ``tabular``, ``regression`` or ``raw_text``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import polars as pl
import pyarrow as pa

from datacheck.model.layouts import Layout, layout_of
from datacheck.model.roles import (
    ROLE_NAMES,
    TARGET_NAMES,
    Roles,
    inner_dtype,
    is_list,
    list_depth,
    seq2seq_layout,
)

__all__ = ["recognize", "shard_layout", "padding_side_of", "hidden_prompts", "REFINES", "SAMPLE_ROWS", "AGREEMENT", "MAX_TAG_ID",
           "MASKED_SHARE", "MASKED_MIN", "MASKED_ELSEWHERE", "MASKED_KEPT", "AUDIO_FEATURES", "CHAT_NAMES",
           "DELIMITERS", "Sample"]

#: rows of a shard read to decide what the columns alone cannot (position resets, hidden prompts,
#: padding, label values); the same sample ``datacheck schema infer`` reads
SAMPLE_ROWS = 1000
#: share of the supervised positions whose label equals the id (or the next id) for the labels to be
#: token labels of a language model: 90%, the threshold of ``labels.shift_mismatch`` (CHECKS.md)
AGREEMENT = 0.9
#: the largest label of a token-classification tag set the recognizer accepts (CoNLL-2003: 8, OntoNotes: 36)
MAX_TAG_ID = 1000
#: share of the supervised positions one id (the mask token) must hold for rows to be pre-masked
#: masked-LM rows: the collator writes ``[MASK]`` at 80% of them (``DataCollatorForLanguageModeling``)
MASKED_SHARE = 0.5
#: the fewest supervised sample positions holding the mask id that tell masked-LM rows
MASKED_MIN = 5
#: the largest share of the attended unsupervised positions that may hold the mask id (a literal
#: ``[MASK]`` in the text; the collator writes it at supervised positions only)
MASKED_ELSEWHERE = 0.01
#: with labels small enough to be tags (below :data:`MAX_TAG_ID` and the supervised count), the share of
#: the supervised positions not holding the mask id whose label is their id for the rows to be masked-LM
#: rows, not tags: the collator keeps half of them unchanged (10% of 20%); tags never equal the ids
MASKED_KEPT = 0.2
#: Hugging Face audio feature columns: raw waveform (wav2vec2) and log-mel frames (Whisper, conformers)
AUDIO_FEATURES = ("input_values", "input_features")
#: conversation columns: TRL/OpenAI ``messages`` ({role, content}) and ShareGPT ``conversations`` ({from, value})
CHAT_NAMES = ("messages", "conversations")
#: columns that delimit the documents of a packed row, besides ``position_ids`` that reset
DELIMITERS = ("document_ids", "seq_lens", "cu_seqlens")
#: float columns taken as a regression target (the role inference reads the same names)
_TARGET_NAMES = TARGET_NAMES

#: words in a column name that mark a label or target (``coarse_label``, ``class``, a numeric ``label_name``):
#: such a column beside text keeps the shard from being a corpus before tokenization (``raw_text``)
_ANSWER_WORDS = ("label", "target", "class", "category", "score")


def _answer_name(col: str) -> bool:
    """Whether column name ``col`` names a label or target (:data:`_ANSWER_WORDS`, or ``y``)."""
    low = col.lower()
    return low == "y" or any(w in low for w in _ANSWER_WORDS)


#: ``columns -> the first SAMPLE_ROWS rows of those columns`` (None: the rows cannot be read)
Sample = Callable[[list[str]], "pl.DataFrame | None"]


def _int_list(t: pl.DataType | None) -> bool:
    return t is not None and is_list(t) and inner_dtype(t).is_integer() and list_depth(t) == 1


def _float_list(t: pl.DataType | None) -> bool:
    return t is not None and is_list(t) and inner_dtype(t).is_float()


def _struct_list(t: pl.DataType | None) -> bool:
    return t is not None and is_list(t) and isinstance(inner_dtype(t), pl.Struct)


def _padded_or_ragged(df: pl.DataFrame, ids: str, mask: str | None, pad: int | None = None,
                      eos: int | None = None) -> tuple[bool, str]:
    """Whether some sample row is padded (a 0 in the mask, or, without a mask, a run of pad ids at
    one end) or the rows differ in length, with the reason in words.

    Without an attention mask (``mask`` None or not sampled) the pad id ``pad``
    (``[tokens] pad_token_id``; None: not read) tells padding: left-padded rows of one length (a
    causal LM's ``padding_side="left"`` without the mask kept) were ``packed_lm``. A row counts as
    padded when it starts or ends with a run of pad ids (not all of it: a row of padding only tells
    no layout) of at least 1 id when ``eos`` (``[tokens] eos_token_id``) is known and differs from
    the pad id, else of at least 2: with pad == eos (GPT-2's convention) a packed row may start or
    end with the single eos of a document, never with two unless a document is empty, and then the
    same run of 2+ occurs inside some row too; a sample holding a run of 2+ pad ids between two
    other ids is therefore packed text (eos of empty documents), never padding evidence."""
    if mask is not None and mask in df.columns and df.height:
        zeros = int(df.select(pl.col(mask).list.eval(pl.element() == 0).list.any().sum()).item() or 0)
        if zeros:
            return True, f"{zeros} of {df.height} sample rows padded ({mask} 0)"
    lens = df[ids].list.len().drop_nulls()
    if lens.n_unique() > 1:
        return True, f"sample rows of {int(lens.min())} to {int(lens.max())} tokens"  # type: ignore[arg-type]
    if pad is not None and (mask is None or mask not in df.columns) and len(lens) and int(lens[0]):
        need = 1 if eos is not None and eos != pad else 2
        is_pad = pl.element() == pad
        runs = df.select(
            lead=pl.col(ids).list.eval((~is_pad).cast(pl.Int64).cum_sum() == 0).list.sum(),
            trail=pl.col(ids).list.reverse().list.eval((~is_pad).cast(pl.Int64).cum_sum() == 0).list.sum(),
            pairs=pl.col(ids).list.eval(is_pad & is_pad.shift(1).fill_null(False)).list.sum(),
            n=pl.col(ids).list.len()).drop_nulls()
        lead, trail, pairs, n = (runs[c].to_numpy().astype(np.int64) for c in ("lead", "trail", "pairs", "n"))
        some = lead < n  # a row of padding only tells no layout
        edge = some & ((lead >= need) | (trail >= need))
        inner = some & (pairs - np.maximum(lead - 1, 0) - np.maximum(trail - 1, 0) > 0)
        if edge.any() and not (need == 2 and inner.any()):
            side = ("left" if not (trail[edge] >= need).any() else "right" if not (lead[edge] >= need).any()
                    else "left and right")
            return True, (f"{int(edge.sum())} of {df.height} sample rows padded on the {side} with pad id {pad}"
                          + (f" (runs of 2+: pad id == eos id {pad}" if need == 2 and eos is not None else
                             " (runs of 2+: eos id unknown" if need == 2 else " (no attention mask") + ")")
    return False, (f"every sample row {int(lens[0])} tokens, unpadded" if len(lens) else "no sample rows")


def _label_evidence(df: pl.DataFrame, ids: str, labels: str, mask: str | None, ignore: int | None,
                    starts: str | None = None, pad: int | None = None) -> dict[str, int]:
    """Counts over the sample rows whose ids and labels have one length: supervised positions
    (``sup``: an attended position whose label is not null, not ``ignore`` and >= 0), those whose
    label equals the id (``same``) / the next id (``next``), the largest supervised label (``max``,
    -1 when none), rows that ignore attended tokens before their first supervised one (``hidden``: a
    prompt hidden from the loss), rows whose labels have another length than the ids (``ragged``),
    and attended ignored positions that are not a document's first token (``inner_ignored``; with
    ``starts``: the position-ids column, 0 at each document's first token). A position is attended
    when the row's ``mask`` (of the ids' length) is not 0 there; in a row without such a mask, when
    its id is not ``pad`` (``[tokens] pad_token_id``; None: every position). ``rows``: the rows
    counted (ids and labels both present and of one length).

    Only attended positions are evidence: labels padded with the pad id under padding ids (a
    seq2seq shard padded to 1,024 with label 0 = id 0 = ``[PAD]``, the loss training on padding)
    once agreed with the ids on most positions and made decoder targets token labels (``causal_lm``).

    Vectorized over the flattened sample (numpy over the list columns' value buffers, one pass per
    count and no per-position row index: a row's first supervised and first attended positions come
    from an argmax over the rows when they have one length, else from a binary search of the row
    starts in the positions that hold them; the ``next`` pairs that cross a row boundary are taken
    off at the row ends): the same counts as the plain-Python loop of
    ``tests/unit/derive/test_layout_evidence.py`` (a property test holds it), about 1.5 ms for 1,000
    rows of 256 tokens, once per shard."""
    ev = {"sup": 0, "same": 0, "next": 0, "max": -1, "hidden": 0, "ragged": 0, "inner_ignored": 0, "rows": 0}
    if not df.height:
        return ev
    if any(inner_dtype(df.schema[c]) == pl.UInt64 for c in (ids, labels, mask, starts) if c is not None):
        both = df.filter(pl.col(ids).is_not_null() & pl.col(labels).is_not_null())
        same_len = both[ids].list.len() == both[labels].list.len()
        ev["ragged"] = int((~same_len).sum())
        sub = both.filter(same_len)
        ev["rows"] = sub.height
        return _label_evidence_rows(sub, ids, labels, mask, ignore, starts, pad, ev)

    def row_lengths(col: str) -> "np.ndarray":
        """Per row, the list's length (int64; -1: a null row). A one-chunk column without a null row:
        the differences of its Arrow offsets, read from the exported buffer (0.01 ms a column of
        1,000 rows, 0.08 ms by polars' list kernel, which the other columns take). Never
        ``ListArray.offsets`` of a sliced array: it runs a compute kernel, whose first use in a
        process initializes pyarrow's compute registry (0.2-0.27 s of a one-shard audit)."""
        s = df[col]
        if s.n_chunks() == 1 and not s.null_count() and isinstance(s.dtype, pl.List):
            arr = s.to_arrow()
            if hasattr(arr, "num_chunks"):  # a ChunkedArray of one chunk
                arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
            width = np.int64 if pa.types.is_large_list(arr.type) else np.int32 if pa.types.is_list(arr.type) else None
            if width is not None:
                offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset:arr.offset + len(arr) + 1]
                return np.diff(offsets).astype(np.int64, copy=False)
        return s.list.len().fill_null(-1).to_numpy().astype(np.int64, copy=False)

    lens_of = {c: row_lengths(c) for c in dict.fromkeys((ids, labels, mask, starts)) if c is not None}
    la, lb = lens_of[ids], lens_of[labels]
    keep = (la >= 0) & (lb >= 0)
    ev["ragged"] = int(np.count_nonzero(keep & (la != lb)))
    keep &= la == lb
    n = int(np.count_nonzero(keep))
    ev["rows"] = n
    if not n:
        return ev
    lens = la[keep]
    ends = np.cumsum(lens)
    total = int(ends[-1])
    if not total:
        return ev
    begins = ends - lens

    def flat(col: str, rows: "np.ndarray") -> "tuple[np.ndarray, np.ndarray | None]":
        """(values in their stored integer type, nulls as 0; validity, None when no element is null)
        of ``col``'s elements in the rows where ``rows`` is True, row after row. The list column's
        value buffer is read as it is (no row is copied), then only the elements of those rows are
        kept (numpy compares mixed integer types exactly)."""
        v = df[col].explode(empty_as_null=False, keep_nulls=False)
        col_lens = lens_of[col]
        present = col_lens >= 0
        nulls = v.null_count()
        vals = v.fill_null(0).to_numpy() if nulls else v.to_numpy()
        valid = v.is_not_null().to_numpy() if nulls else None
        if not (present.all() and rows.all()):  # some row dropped: keep the elements of the others
            take = np.repeat(rows[present], col_lens[present])
            vals = vals[take]
            valid = valid[take] if valid is not None else None
        return vals, valid

    def spread(row_mask: "np.ndarray") -> "np.ndarray":
        """A mask over the kept rows, as a mask over their positions."""
        return np.repeat(row_mask, lens)

    a, a_ok = flat(ids, keep)
    b, b_ok = flat(labels, keep)
    attended: "np.ndarray | None" = None  # None: every position attended
    masked = np.zeros(n, dtype=bool)  # per kept row: a mask of the ids' length says what is attended
    if mask is not None:
        in_m = (lens_of[mask] == la) & keep
        if in_m.any():
            mv, m_ok = flat(mask, in_m)
            att = mv != 0
            if m_ok is not None:
                att &= m_ok
            masked = in_m[keep]
            if masked.all():
                attended = att
            else:
                attended = np.ones(total, dtype=bool)
                attended[spread(masked)] = att
    if pad is not None and not masked.all():  # the other rows: a pad id is not attended (a null id is)
        real = a != pad
        if a_ok is not None:
            real |= ~a_ok
        attended = real if attended is None else np.where(spread(masked), attended, real)
    sup = b >= 0
    if b_ok is not None:
        sup &= b_ok
    if ignore is not None and ignore >= 0:  # a negative ignore index is never >= 0: already out
        sup &= b != ignore
    if attended is not None:
        sup &= attended
    if starts is not None:
        in_s = (lens_of[starts] == la) & keep
        if in_s.any():
            sv, s_ok = flat(starts, in_s)
            inner = sv != 0
            if s_ok is not None:
                inner |= ~s_ok
            in_s = in_s[keep]
            if not in_s.all():
                inner_all = np.zeros(total, dtype=bool)
                inner_all[spread(in_s)] = inner
                inner = inner_all
            counted = inner & ~sup
            if attended is not None:
                counted &= attended
            ev["inner_ignored"] = int(np.count_nonzero(counted))
    ev["sup"] = int(np.count_nonzero(sup))
    if not ev["sup"]:
        return ev
    if a.dtype != b.dtype:  # one conversion for both comparisons (numpy would convert for each)
        a = a.astype(np.promote_types(a.dtype, b.dtype))
    same = sup & (b == a)
    if a_ok is not None:
        same &= a_ok
    ev["same"] = int(np.count_nonzero(same))
    # pairs (i, i + 1) of a supervised label and the next id, then those that cross into the next row
    pair = sup[:-1] & (b[:-1] == a[1:])
    if a_ok is not None:
        pair &= a_ok[1:]
    last = ends[(lens > 0) & (ends < total)] - 1  # a non-empty row's last position, a next row after it
    ev["next"] = int(np.count_nonzero(pair)) - int(np.count_nonzero(pair[last]))
    ev["max"] = int(np.max(b, where=sup, initial=0))  # sup: some labels >= 0 (initial 0 fits unsigned dtypes)

    seen = a_ok if attended is None else (attended if a_ok is None else attended & a_ok)
    if lens.min() == lens.max():  # rows of one length: a row's first position in a mask by argmax
        width = int(lens[0])
        sup2 = sup.reshape(n, width)
        first_sup = sup2.argmax(axis=1)
        has_sup = sup2[np.arange(n), first_sup]
        if seen is None:  # every position seen: a row's first is its position 0
            first_seen = np.zeros(n, dtype=first_sup.dtype)
        else:
            seen2 = seen.reshape(n, width)
            first_seen = seen2.argmax(axis=1)
            has_sup &= seen2[np.arange(n), first_seen]
    else:
        def first_in_row(where: "np.ndarray") -> "tuple[np.ndarray, np.ndarray]":
            """(per kept row, the flat index of its first position in ``where`` (sorted flat
            indices); whether it has one)."""
            k = np.searchsorted(where, begins)
            got = where[np.minimum(k, max(where.size - 1, 0))] if where.size else begins
            return got, (k < where.size) & (got < ends)

        first_sup, has_sup = first_in_row(np.flatnonzero(sup))
        if seen is None:
            first_seen = begins
        else:
            first_seen, has_seen = first_in_row(np.flatnonzero(seen))
            has_sup &= has_seen
    ev["hidden"] = int(np.count_nonzero(has_sup & (first_seen < first_sup)))
    return ev


def hidden_prompts(df: pl.DataFrame, ids: str, labels: str, mask: str | None, ignore: int | None,
                   pad: int | None = None) -> tuple[int, int]:
    """(rows that hide a prompt from the loss, rows judged) over the sample ``df``: a row hides a
    prompt when an attended token (``mask`` not 0 there, or no such mask) comes before its first
    supervised label (not null, not ``ignore``, >= 0); a row whose mask is all 0 attends nothing and
    hides nothing; a row without a mask of its length attends its ids other than ``pad`` (None: all). Rows judged: ids and labels both present and of one length. The one count that
    both the recognizer (``... of N sample rows hide a prompt from the loss``) and ``datacheck schema
    infer`` say (:func:`_label_evidence`'s ``hidden`` and ``rows``)."""
    ev = _label_evidence(df, ids, labels, mask if mask is not None and mask in df.columns else None, ignore, pad=pad)
    return ev["hidden"], ev["rows"]


def _label_evidence_rows(df: pl.DataFrame, ids: str, labels: str, mask: str | None, ignore: int | None,
                         starts: str | None, pad: int | None, ev: dict[str, int]) -> dict[str, int]:
    """:func:`_label_evidence` row by row in Python over ``df`` (rows of ids and labels of one length,
    ``ev["rows"]`` and ``ev["ragged"]`` already counted): for unsigned 64-bit columns, whose values
    past int64 the vectorized pass cannot hold."""
    cols = [ids, labels] + ([mask] if mask else []) + ([starts] if starts else [])
    for r in df.select(cols).iter_rows():
        a, b = r[0], r[1]
        m = r[2] if mask else None
        s = r[-1] if starts else None
        if m is not None and len(m) == len(a):
            att = [bool(x) for x in m]
        else:
            att = [pad is None or x != pad for x in a]
        sup = [i for i, v in enumerate(b) if v is not None and v != ignore and v >= 0 and att[i]]
        ign = [i for i, v in enumerate(b) if att[i] and (v is None or v == ignore or v < 0)]
        if s is not None and len(s) == len(b):
            ev["inner_ignored"] += sum(1 for i in ign if s[i] != 0)
        if sup and sup[0] > 0 and any(a[i] is not None and att[i] for i in range(sup[0])):
            ev["hidden"] += 1
        for i in sup:
            ev["sup"] += 1
            ev["same"] += b[i] == a[i]
            ev["next"] += i + 1 < len(a) and b[i] == a[i + 1]
            ev["max"] = max(ev["max"], b[i])
    return ev


def _masked_positions(df: pl.DataFrame, ids: str, labels: str, mask: str | None, ignore: int | None,
                      pad: int | None = None) -> tuple[int, int, int, int, int, int] | None:
    """Whether the sample's rows read as pre-masked masked-LM rows (``DataCollatorForLanguageModeling(
    mlm=True)`` output saved as data): ``(mask id, supervised positions holding it, supervised
    positions, attended unsupervised positions holding it, supervised positions not holding it whose
    label is their id (the collator's 10% kept unchanged), supervised positions not holding it)``, or None.

    Over the sample rows whose ids and labels have one length, the attended positions (``mask`` not 0
    there; without a mask of the row's length, ids other than ``pad``, or every position when
    ``pad`` is None) whose label is not null, not ``ignore`` and >= 0 are the supervised ones. The
    rows are masked-LM rows when one id (the mask token: the collator writes it at 80% of the
    supervised positions, a random id at 10%, the original at 10%) holds at least
    :data:`MASKED_SHARE` of the supervised positions (and at least :data:`MASKED_MIN` of them), at
    most :data:`MASKED_ELSEWHERE` of the attended unsupervised positions (the collator writes it
    nowhere else; a literal ``[MASK]`` in the text may occur), and the labels there are never that id
    (they are the original ids). The mask id is read from the rows, so no tokenizer is needed."""
    both = df.select(ids, labels, *([mask] if mask is not None and mask in df.columns else [])).drop_nulls([ids, labels])
    both = both.filter(pl.col(ids).list.len() == pl.col(labels).list.len())
    if not both.height:
        return None
    a = both[ids].explode().to_numpy()
    b = both[labels].explode().to_numpy()
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":  # a null element: not collator output
        return None
    attended = np.ones(a.shape, dtype=bool) if pad is None else a != pad
    if mask is not None and mask in both.columns:
        same = both[mask].list.len() == both[ids].list.len()
        if bool(same.all()):
            m = both[mask].explode().to_numpy()
            if m.dtype.kind in "iub":
                attended = m != 0
    sup = attended & (b >= 0)
    if ignore is not None:
        sup &= b != ignore
    n_sup = int(np.count_nonzero(sup))
    if n_sup < MASKED_MIN:
        return None
    vals, counts = np.unique(a[sup], return_counts=True)
    mid = int(vals[np.argmax(counts)])
    at = int(counts.max())
    if at < max(MASKED_MIN, MASKED_SHARE * n_sup):
        return None
    rest = attended & ~sup
    elsewhere = int(np.count_nonzero(rest & (a == mid)))
    if elsewhere > MASKED_ELSEWHERE * max(int(np.count_nonzero(rest)), 1):
        return None
    if bool(np.any(sup & (a == mid) & (b == mid))):
        return None
    other = sup & (a != mid)
    return mid, at, n_sup, elsewhere, int(np.count_nonzero(other & (a == b))), int(np.count_nonzero(other))


def _occurs(needle: list[int], hay: list[int]) -> bool:
    """Whether the non-empty list ``needle`` is a contiguous run of the list ``hay`` (compared at
    each position of ``hay`` that holds ``needle``'s first value)."""
    k, first = len(needle), needle[0]
    return any(hay[i] == first and hay[i:i + k] == needle for i in range(len(hay) - k + 1))


def _decoder_targets(df: pl.DataFrame, ids: str, labels: str, mask: str | None, ignore: int | None) -> tuple[int, int, int]:
    """Whether the sample's ``labels`` (integer lists of the ids' length) read as a decoder's target
    sequences padded to the encoder's length (T5/BART rows from ``tokenizer(text, text_target=...,
    padding="max_length")``, labels padded with -100 or with the pad id): ``(targets, own, judged)``.

    ``judged``: the rows whose ids and labels are present, of one length, with a supervised label
    (not null, not ``ignore``, >= 0). ``targets``: those whose supervised labels are one run from
    position 0 (a target sequence, not a response after a hidden prompt) and are neither a run
    inside the row's own ids (token labels shifted by any offset) nor the attended ids of some
    sample row (labels copied from another row). ``own``: those whose supervised length differs
    from the row's attended length (the ``mask`` 1 positions, or the row's length without a mask of
    its length): a target of its own length, unrelated to the encoder's mask.

    Python per row, over at most :data:`SAMPLE_ROWS` rows, run only when the labels agree with
    neither the ids nor the next ids (the recognizer's unsure branch)."""
    cols = [ids, labels] + ([mask] if mask is not None else [])
    rows = df.select(cols).rows()
    inputs = []
    for r in rows:
        a, m = r[0], r[2] if mask is not None else None
        if a is None or None in a:
            continue
        if m is not None and len(m) == len(a) and None not in m:
            a = [x for x, keep in zip(a, m) if keep]
        inputs.append(tuple(a))
    seen = set(inputs)
    targets = own = judged = 0
    for r in rows:
        a, b, m = r[0], r[1], r[2] if mask is not None else None
        if a is None or b is None or len(a) != len(b) or None in a:
            continue
        sup = [i for i, v in enumerate(b) if v is not None and v != ignore and v >= 0]
        if not sup:
            continue
        judged += 1
        k = len(sup)
        attended = sum(1 for v in m if v) if m is not None and len(m) == len(a) and None not in m else len(a)
        own += k != attended
        if sup[-1] != k - 1:  # not one run from position 0
            continue
        target = b[:k]
        if tuple(target) in seen or _occurs(target, a):
            continue
        targets += 1
    return targets, own, judged


#: roles whose rows no layout of numbers or plain text holds: lost with no stand-in, the layout is unsure
_STRUCTURAL = frozenset({"input_ids", "attention_mask", "labels", "token_type_ids", "aligned", "messages",
                         "assistant_mask", "position_ids", "document_ids", "seq_lens", "cu_seqlens", "chosen",
                         "rejected"})
#: the layouts a shard falls to when only numbers or text are left
_FALLBACKS = frozenset({"tabular", "regression", "raw_text"})


def recognize(schema: dict[str, pl.DataType], roles: Roles, sample: Sample, ignore: int | None = -100,
              spans: bool = False, pad: int | None = None, eos: int | None = None) -> Layout:
    """The layout the shard's columns and sample rows show (the module docstring's rules), of
    :func:`_recognize`; a declared role the shard lacks (``roles.missing``) is read from its stand-in
    (``roles.stand_ins``, made by role resolution) and named in the reason, and with no stand-in a lost token, conversation or
    pair role (:data:`_STRUCTURAL`) leaves the layout unknown rather than a layout of what is left
    (:data:`_FALLBACKS`). Arguments and result: :func:`_recognize`'s."""
    lost = [(r, c) for r, c in roles.missing if not roles.of(r)]
    if not lost and not roles.stand_ins:
        return _recognize(schema, roles, sample, ignore, spans, pad, eos)
    said = "; ".join([f"[columns] {r} names {c!r}, which this shard " + ("lacks" if c not in schema else
                      "holds in a dtype that cannot serve it") + f" ({used!r} read in its place, as if the key were unset)"
                      for r, c, used in roles.stand_ins]
                     + [f"[columns] {r} names {c!r}, which this shard lacks" for r, c in lost])
    layout = _recognize(schema, roles, sample, ignore, spans, pad, eos)
    bare = [r for r, _c in lost if r in _STRUCTURAL]
    if bare and (layout.name in _FALLBACKS or layout.name is None):
        return Layout(None, "unknown", f"unsure: {said}, so the rows cannot be told from the columns left"
                                       f" ({layout.why}); fix [columns] {bare[0]} or set [dataset] layout")
    return Layout(layout.name, layout.source, f"{layout.why} ({said})")


def _recognize(schema: dict[str, pl.DataType], roles: Roles, sample: Sample, ignore: int | None = -100,
               spans: bool = False, pad: int | None = None, eos: int | None = None) -> Layout:
    """The layout the shard's columns and sample rows show (the module docstring's rules).

    Args:
        schema: ``{column: dtype}`` as the checks read the shard.
        roles: its resolved roles.
        sample: reads the first :data:`SAMPLE_ROWS` rows of the given columns (called only when a
            rule needs values; None when they cannot be read: the layout is then unknown).
        ignore: the labels' ignore index (``[labels] ignore_index``; None: none).
        spans: ``[sft] response_template_ids`` is set: the rows have assistant spans (token rows are
            then fine-tuning rows, ``sft_tokenized`` or ``packed_sft``, whatever their labels hide).
        pad: ``[tokens] pad_token_id`` (None: unknown): in rows without an attention mask, the
            positions of this id are padding, no evidence of what the labels are, and a run of
            them at one end of a row makes the row padded (:func:`_padded_or_ragged`).
        eos: ``[tokens] eos_token_id`` (None: unknown): with pad == eos (or eos unknown) only a run
            of 2+ pad ids at one end of a row is padding (a packed row may end in one eos).

    Returns:
        A :class:`Layout` of source ``recognized``, or of source ``unknown`` (name None) with the
        reason (``unsure: ...`` when the evidence points two ways; set ``[dataset] layout``).
    """
    def found(name: str, why: str) -> Layout:
        return Layout(name, "recognized", why)

    def unknown(why: str) -> Layout:
        return Layout(None, "unknown", why + "; set [dataset] layout (`datacheck checks --layout` lists the layouts)")

    if roles.chosen is not None and roles.rejected is not None:
        return found("dpo", f"preference pairs {roles.chosen!r} and {roles.rejected!r}")
    completion = next((c for c in ("completion", "completion_input_ids") if c in schema), None)
    if completion is not None and any(schema.get(c) == pl.Boolean for c in ("label", "labels")):
        return found("kto", f"{completion!r} and a Boolean 'label' (unpaired preference)")
    labels = roles.labels if roles.labels is not None and _int_list(schema.get(roles.labels)) else None
    audio = [c for c in AUDIO_FEATURES if _float_list(schema.get(c))]
    if audio and labels is not None:
        return found("ctc", f"audio features {audio[0]!r} and label sequences {labels!r}")
    if roles.messages is not None and _struct_list(schema.get(roles.messages)):
        return found("chat_sft", f"conversations {roles.messages!r}")
    ids = roles.input_ids if roles.input_ids is not None and _int_list(schema.get(roles.input_ids)) else None
    if ids is not None:
        return _tokenized(schema, roles, sample, ids, labels, ignore, spans, pad, found, unknown, eos)
    if roles.aligned and roles.labels is not None:
        return found("token_classification", f"aligned words and tags {list(roles.aligned[0])}")
    # the target role (given, or a float label read as the target) first, then float columns named as targets
    floats = [c for c in roles.of("target") if c in schema] + [
        c for c in _TARGET_NAMES if c in schema and schema[c].is_float() and c not in roles.of("target")]
    if roles.text and roles.label is not None:
        return found("text_classification", f"text {list(roles.text)} and class label {roles.label!r}")
    if (roles.text or roles.features) and floats:
        return found("regression", f"text {list(roles.text or roles.features)} and float target {floats[0]!r}")
    numeric = [c for c, t in schema.items() if inner_dtype(t).is_numeric() or inner_dtype(t) == pl.Boolean]
    if schema and len(numeric) == len(schema):
        if floats:
            return found("regression", f"numeric columns only, float target {floats[0]!r}")
        if roles.label is not None:
            return found("tabular", f"numeric columns only, class label {roles.label!r}")
    if roles.text and not [r for r in ROLE_NAMES if r != "text" and roles.of(r)]:
        named = [c for c in schema if c not in roles.text and _answer_name(c)]
        if named:
            return unknown(f"text {list(roles.text)} and {named[0]!r}, named like a label or target but not read as one "
                           "(set [columns] label or target for a classification or regression set)")
        return found("raw_text", f"text {list(roles.text)} and no label (a corpus before tokenization)")
    if not schema:
        return unknown("the shard has no columns")
    return unknown("no layout fits the columns " + ", ".join(f"{c} ({t})" for c, t in list(schema.items())[:8])
                   + (", ..." if len(schema) > 8 else ""))


def _tokenized(schema: dict[str, pl.DataType], roles: Roles, sample: Sample, ids: str, labels: str | None,
               ignore: int | None, spans: bool, pad: int | None, found: Callable[[str, str], Layout],
               unknown: Callable[[str], Layout], eos: int | None = None) -> Layout:
    """Rule 5 of the module docstring: rows of token ids."""
    dec = seq2seq_layout(None, schema)
    if dec is not None:
        return found("seq2seq", f"encoder-decoder: {dec}")
    mask = roles.attention_mask if roles.attention_mask is not None and _int_list(schema.get(roles.attention_mask)) else None
    pos = roles.position_ids if roles.position_ids is not None and _int_list(schema.get(roles.position_ids)) else None
    delim = [getattr(roles, r) for r in DELIMITERS if getattr(roles, r) is not None]
    cols = [c for c in (ids, labels, mask, pos) if c is not None]
    df = sample(cols)
    if df is None:
        return unknown(f"token ids {ids!r}, but the sample rows could not be read")
    if not df.height:
        return unknown(f"token ids {ids!r}, but the shard has no rows to tell the layout by")
    resets = 0
    if pos is not None:
        resets = int(df.select(pl.col(pos).list.slice(1).list.eval(pl.element() == 0).list.any().sum()).item() or 0)
    ev = _label_evidence(df, ids, labels, mask, ignore, pos if resets else None, pad) if labels is not None else None
    if ev is not None and ev["ragged"] and not ev["rows"]:
        return found("seq2seq", f"{labels!r} of another length than {ids!r} in {ev['ragged']} sample rows "
                                "(decoder targets)")
    if delim or resets:
        by = ", ".join(repr(c) for c in delim) or f"{pos!r} (reset inside {resets} of {df.height} sample rows)"
        if spans or roles.assistant_mask is not None or (
                ev is not None and (ev["inner_ignored"] or (not resets and ev["hidden"]))):
            return found("packed_sft", f"packed rows, documents from {by}; labels hide prompts")
        return found("packed_lm", f"packed rows, documents from {by}")
    if labels is None:
        if roles.label is not None:
            return found("text_classification", f"token ids {ids!r} and class label {roles.label!r}")
        if roles.target:
            return found("text_classification", f"token ids {ids!r} and target {roles.target[0]!r} (one answer a "
                                                "row: a multi-label vector or a regression score)")
        if roles.assistant_mask is not None:
            return found("sft_tokenized", f"token ids {ids!r} and assistant mask {roles.assistant_mask!r}, no "
                                          "labels (the collator makes them: the assistant tokens only)")
        padded, how = _padded_or_ragged(df, ids, mask, pad, eos)
        return found("causal_lm" if padded else "packed_lm", f"token ids {ids!r} without labels; {how}")
    assert ev is not None
    lm = bool(ev["sup"]) and max(ev["same"], ev["next"]) >= AGREEMENT * ev["sup"]
    if ev["ragged"] and ev["sup"] and not lm:
        return found("seq2seq", f"{labels!r} of another length than {ids!r} in {ev['ragged']} of "
                                f"{ev['ragged'] + ev['rows']} sample rows, and unlike the ids where the lengths agree "
                                "(decoder targets)")
    if ev["ragged"]:
        return unknown(f"unsure: {labels!r} has the length of {ids!r} in {ev['rows']} sample rows and another length "
                       f"in {ev['ragged']} (seq2seq or token labels?)")
    if not ev["sup"]:
        return unknown(f"unsure: no sample row of {labels!r} has a supervised label, so it tells nothing")
    if not lm:
        masked = _masked_positions(df, ids, labels, mask, ignore, pad)
        tags = ev["max"] < MAX_TAG_ID and ev["max"] < ev["sup"]
        if masked is not None and (not tags or masked[4] >= MASKED_KEPT * max(masked[5], 1)):
            mid, at, sup, elsewhere = masked[:4]
            return found("masked_lm", f"{labels!r} supervises {sup} sample positions, {at} of them holding id {mid} "
                                      f"in {ids!r} (the mask token), {elsewhere} unsupervised attended ones (pre-masked "
                                      "masked-LM rows: DataCollatorForLanguageModeling(mlm=True))")
        if ev["max"] < MAX_TAG_ID and ev["max"] < ev["sup"]:
            return found("token_classification", f"{labels!r} holds class ids up to {ev['max']} aligned with {ids!r}")
        targets, own, judged = _decoder_targets(df, ids, labels, mask, ignore)
        if judged and targets >= AGREEMENT * judged and 2 * own >= judged:
            return found("seq2seq", f"{labels!r} unlike {ids!r} (the ids on {ev['same']} and the next id on "
                                    f"{ev['next']} of {ev['sup']} supervised sample positions); in {targets} of "
                                    f"{judged} sample rows a target sequence of its own from position 0, of another "
                                    f"length than the attended ids in {own} (decoder targets padded to the "
                                    "encoder's length)")
        return unknown(f"unsure: {labels!r} equals {ids!r} on {ev['same']} and the next id on {ev['next']} of "
                       f"{ev['sup']} supervised sample positions (neither token labels nor tags)")
    if roles.assistant_mask is not None or ev["hidden"] or spans:
        why = (f"assistant mask {roles.assistant_mask!r}" if roles.assistant_mask is not None else
               "[sft] response_template_ids marks the assistant spans" if spans else
               f"{ev['hidden']} of {ev['rows']} sample rows hide a prompt from the loss")
        return found("sft_tokenized", f"token ids {ids!r} and labels {labels!r}; {why}")
    padded, how = _padded_or_ragged(df, ids, mask, pad, eos)
    return found("causal_lm" if padded else "packed_lm",
                 f"token ids {ids!r}, labels {labels!r} = the ids (no prompt hidden); {how}")


#: built-in contract -> the finer layouts whose rows it also holds (``datacheck schema infer`` proposes
#: ``packed_lm`` for packed SFT rows and ``causal_lm`` for encoder rows): the recognizer may refine it
REFINES: dict[str, frozenset[str]] = {
    "packed_lm": frozenset({"packed_sft"}),
    "causal_lm": frozenset({"packed_lm", "packed_sft", "sft_tokenized", "text_classification", "token_classification"}),
    "sft_tokenized": frozenset({"packed_sft"}),
    "tabular": frozenset({"regression"}),
}


def shard_layout(configured: str | None, schema_name: str | None, schema: dict[str, pl.DataType], roles: Roles,
                 sample: Sample, ignore: int | None = -100, spans: bool = False, pad: int | None = None,
                 eos: int | None = None) -> Layout:
    """The shard's layout: ``[dataset] layout`` (source ``config``), else the built-in contract of
    ``[dataset] schema`` (``schema``; refined by :func:`recognize` to one of its :data:`REFINES`, e.g.
    packed SFT rows under ``schema = "packed_lm"``), else :func:`recognize` (``recognized`` or
    ``unknown``)."""
    given = layout_of(configured, schema_name)
    if given is not None and given.source == "schema" and REFINES.get(given.name or ""):
        found = recognize(schema, roles, sample, ignore, spans, pad, eos)
        if found.name in REFINES[given.name or ""]:
            return Layout(found.name, "recognized", f"{found.why} (rows of [dataset] schema = \"{given.name}\")")
    if given is not None:
        return given
    return recognize(schema, roles, sample, ignore, spans, pad, eos)


def padding_side_of(sample: pl.DataFrame, mask: str) -> tuple[str | None, int, int]:
    """Where the rows of ``sample`` are padded, from their attention mask column ``mask`` (lists of
    0/1 ints or bools, one per row): ``("left", first0, last0)`` when some row is padded on the left
    only and none on the right only, ``("right", ...)`` for the converse, ``(None, ...)`` when no row
    is padded or both occur. ``first0`` / ``last0``: the rows padded on one side only, i.e. starting
    / ending with a 0 and holding a 1 at the other end. A row that starts and ends with a 0 (all
    padding: ``empty.all_padding``; or a hole at its far end: ``mask.not_contiguous``) tells no
    side and is not counted, nor are null and empty rows: one such defective row in a left-padded
    shard once made the shard's side unknown, judged right-padded, and every clean row
    ``mask.not_contiguous``. The same reading serves the audit (``[tokens] padding_side`` unset) and
    ``datacheck schema infer``."""
    m = sample[mask]
    head = m.list.first().cast(pl.Int64, strict=False)
    tail = m.list.last().cast(pl.Int64, strict=False)
    first0 = int(((head == 0) & (tail != 0)).sum())
    last0 = int(((tail == 0) & (head != 0)).sum())
    if first0 and not last0:
        return "left", first0, last0
    if last0 and not first0:
        return "right", first0, last0
    return None, first0, last0
