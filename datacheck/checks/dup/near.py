"""``dup.near_duplicate``: rows whose text (or token ids) are near-identical, within and across
shards and splits, found by MinHash with LSH banding (CHECKS.md "dup").

Opt-in: ``[dup] near = true`` (threshold ``[dup] near_threshold``, default 0.8 as in CHECKS.md).
Off, every shard lists the check as skipped with the reason. It is off by default because it is
the costliest pass of an audit (``benchmarks/bench_neardup.py``: the signatures cost about as
much as the rest of a token shard's checks).

What is compared (a row's "document"):

- the text role: the row's text columns joined with ``"\\n"`` (a list-of-strings column joined
  with ``"\\n"`` first; null is the empty string); else
- ``input_ids``: the row's token ids.

Shingles: every run of 5 consecutive **characters** (Unicode code points, not bytes or words:
short texts such as sentences and titles have enough of them, and no tokenizer is needed) or 5
consecutive token ids. Values are compared exactly (no case or whitespace folding). A row with
fewer than 5 characters (tokens) has no shingle and is never a near-duplicate (its exact repeats
are ``dup.exact_*``); nor is a row of a running text (a ``.txt`` read by line or paragraph:
:attr:`~datacheck.checks.spec.ShardContext.running_text`) of fewer than 200 characters (short lines
near-repeat in any text: "What is the matter?" and "What is the matter" in tinyshakespeare). Each shingle is hashed to 32 bits: a polynomial of its 5 values modulo 2^64
(multiplier 0x100000001B3, the 64-bit FNV prime) mixed with the MurmurHash3 64-bit finalizer,
top 32 bits.

MinHash: ``NUM_PERM`` = 128 permutations of datasketch's ``affine32`` scheme (``MinHash(num_perm=
128, seed=1, scheme="affine32")``: the shingle hash pre-mixed with the MurmurHash3 32-bit
finalizer, then ``a * h + b`` modulo 2^32 with datasketch's seeded ``a``, ``b``), computed
vectorized over a whole shard with numpy; ``benchmarks/bench_neardup.py`` shows the signatures
equal datasketch's for the same shingle hashes, and how much faster they are. The estimated
Jaccard similarity of two rows is the fraction of equal signature values (standard error
<= 0.045 at 128 permutations).

Per shard (in the shard's one query, then numpy): payload ``"neardup.minhash"`` =
``{"sig": uint32 [rows, 128], "shingles": int32 [rows]}`` (512 bytes per row; cached with the
shard result) and ``"neardup.text"``: the UInt128 content hash of the document
(:mod:`datacheck.io.rowhash`), to tell exact copies apart. The dataset stage reads no shard.

Dataset stage: LSH with ``b`` bands of ``r`` rows chosen for the threshold as datasketch's
``MinHashLSH`` chooses them, weighted towards recall (:func:`lsh_params`: 14 x 9 at 0.8); rows sharing a band bucket are linked to the bucket's first row when
their estimated similarity is >= the threshold; clusters are the connected components. A
cluster's rows may chain (a ~ b ~ c with a, c below the threshold): members are listed with
their similarity to the cluster's first row.

count = over all clusters, the number of distinct documents beyond the first of each cluster
(exact copies inside a cluster are not counted again: ``dup.exact_*`` reports them); clusters
made only of exact copies are not listed. Memory in the dataset stage: the signatures are never
concatenated (:class:`ShardSignatures`): past ``$DATACHECK_SPILL_ROWS`` / 32 rows an audit spills
each shard's signatures to a column-major ``.npy`` file as the shard's result arrives
(:mod:`datacheck.io.hashspill`), and LSH runs one band at a time: per row 1 + 8 bytes, plus one
band's keys and sort order (about 24 B a row), plus the document hashes (16 B a row); signature
rows are read only for the candidate pairs.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable

import numpy as np
import polars as pl

from datacheck.checks.registry import Payload, ShardContext, ShardItem, check, derives, finding, measure
from datacheck.derive.read import ALPACA, CHAT
from datacheck.io.hashspill import SpilledColumns
from datacheck.io.rowhash import row_hash_expr
from datacheck.model import layouts as lay
from datacheck.model.findings import Example, Finding, Skipped
from datacheck.model.roles import content_gap

__all__ = ["NEAR_KEY", "TEXT_KEY", "NUM_PERM", "SHINGLE", "signatures", "lsh_params", "clusters",
           "ShardSignatures", "shard_clusters",
           "near_payload", "near_duplicate"]

#: the read path's derivations this family reads: the Alpaca layout's messages and the chat
#: template's token columns are role columns like the shard's own
derives(__name__, ALPACA, CHAT)

NEAR_KEY = "neardup.minhash"
TEXT_KEY = "neardup.text"
NUM_PERM = 128
SHINGLE = 5
_SEED = 1
_FNV64 = np.uint64(0x100000001B3)
_MAX32 = np.uint32(0xFFFFFFFF)
_BLOCK = 4096  # shingles per block of signature work (4096 x 128 x 4 B = 2 MiB)


@functools.lru_cache(maxsize=1)
def permutations() -> tuple[np.ndarray, np.ndarray]:
    """(a, b): uint32 [NUM_PERM] each, drawn as datasketch's ``affine32`` scheme draws them
    (``numpy.random.RandomState(1)``; ``a`` odd, so ``a * h + b`` mod 2^32 is a bijection)."""
    gen = np.random.RandomState(_SEED)
    a = gen.randint(0, 1 << 31, NUM_PERM, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, NUM_PERM, dtype=np.uint32)
    return a, b


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> np.uint64(33))
    h = h * np.uint64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> np.uint64(33))


def fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer (datasketch's pre-mix of the ``affine32`` scheme), uint32 in and out."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def shingle_hashes(values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 32-bit hashes of every 5-gram of every row (module docstring), and shingles per row.

    Args:
        values: the rows' code points (or token ids) concatenated, any integer dtype (1-D).
        lengths: int64 [rows]: each row's number of values (they sum to ``len(values)``).

    Returns:
        (uint32 [sum of counts] hashes in row order, int64 [rows] counts = max(length - 4, 0)).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    counts = np.maximum(lengths - (SHINGLE - 1), 0)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.uint32), counts
    v = np.asarray(values).astype(np.uint64, copy=False)
    span = v.size - (SHINGLE - 1)
    h = v[:span].copy()
    with np.errstate(over="ignore"):
        for k in range(1, SHINGLE):
            h *= _FNV64
            h += v[k:k + span]
        h = _fmix64(h)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(total, dtype=np.int64) + np.repeat(starts - first, counts)
    return (h[pos] >> np.uint64(32)).astype(np.uint32), counts


def signatures(values: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MinHash signatures of every row (module docstring).

    Args:
        values, lengths: as for :func:`shingle_hashes`.

    Returns:
        (uint32 [rows, NUM_PERM] signatures: 0xFFFFFFFF everywhere for a row without shingles,
        int32 [rows] shingle counts).
    """
    hv, counts = shingle_hashes(values, lengths)
    rows = counts.size
    sig = np.full((rows, NUM_PERM), _MAX32, dtype=np.uint32)
    has = np.flatnonzero(counts > 0)
    if has.size:
        ends = np.cumsum(counts[has])
        seg = np.concatenate([[0], ends[:-1]])
        hv = fmix32(hv)
        a, b = permutations()
        out = np.empty((has.size, NUM_PERM), dtype=np.uint32)
        # blocks of whole rows of about _BLOCK shingles: the [NUM_PERM, shingles] products of a
        # block stay in the CPU cache (one pass per permutation over the whole shard would not)
        cuts = np.unique(np.searchsorted(ends, np.arange(_BLOCK, int(ends[-1]), _BLOCK), side="left"))
        bounds = np.concatenate([[0], cuts + 1, [has.size]])
        with np.errstate(over="ignore"):
            for r0, r1 in zip(bounds[:-1], bounds[1:]):
                if r0 >= r1:
                    continue
                lo, hi = int(seg[r0]), int(ends[r1 - 1])
                block = a[:, None] * hv[None, lo:hi]  # [NUM_PERM, shingles]: the reduction runs along rows
                block += b[:, None]
                out[r0:r1] = np.minimum.reduceat(block, seg[r0:r1] - lo, axis=1).T
        sig[has] = out
    return sig, counts.astype(np.int32)


def _document_values(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(values, lengths) of a shard's documents: code points of strings, ids of integer lists."""
    if s.dtype == pl.String:
        texts = s.fill_null("").to_list()
        lengths = s.fill_null("").str.len_chars().to_numpy().astype(np.int64)
        buf = "".join(texts).encode("utf-32-le", "surrogatepass")
        return np.frombuffer(buf, dtype=np.uint32), lengths
    lengths = s.list.len().fill_null(0).to_numpy().astype(np.int64)
    ids = s.explode().drop_nulls()
    # uint64 as it is (its bits are the int64 view of the same ids below 2**63; one beyond did not cast)
    flat = (ids if ids.dtype == pl.UInt64 else ids.cast(pl.Int64)).to_numpy()
    if flat.size != int(lengths.sum()):  # a null id inside a list: drop it from its row's sequence
        lengths = s.list.eval(pl.element().drop_nulls()).list.len().fill_null(0).to_numpy().astype(np.int64)
    return flat.view(np.uint64) if flat.dtype == np.int64 else flat, lengths


def _signature_post(v: Any) -> dict[str, np.ndarray]:
    s = v if isinstance(v, pl.Series) else pl.Series(v)
    values, lengths = _document_values(s)
    sig, counts = signatures(values, lengths)
    return {"sig": sig, "shingles": counts}


def _document(ctx: ShardContext) -> tuple[pl.Expr, list[str]] | None:
    """The expression of a row's document and the columns it reads, or None (no text, no input_ids)."""
    text = [c for c in (ctx.roles.text or ()) if c in ctx.schema]
    if text:
        parts = [(pl.col(c).list.join("\n") if isinstance(ctx.schema[c], pl.List) else pl.col(c).cast(pl.String))
                 .fill_null("") for c in text]
        return (parts[0] if len(parts) == 1 else pl.concat_str(parts, separator="\n")), text
    ids = ctx.roles.input_ids
    if ids and ids in ctx.schema and isinstance(ctx.schema[ids], pl.List):
        return pl.col(ids), [ids]
    return None


def enabled(cfg: Any) -> bool:
    return bool(cfg.dup.near)


@measure("neardup")
def near_payload(ctx: ShardContext) -> Iterable[Payload]:
    """The shard's MinHash signatures and document hashes (module docstring), when ``[dup] near``."""
    if not enabled(ctx.cfg):
        return
    doc = _document(ctx)
    if doc is None or content_gap(ctx.roles, doc[1]) is not None:
        return  # a text of which a declared column is missing: skipped by the shard stage
    expr, cols = doc
    floor = ctx.running_text
    if floor is not None and cols != [ctx.roles.input_ids]:  # a running text's short lines: no shingle
        expr = pl.when(expr.str.len_chars() >= floor).then(expr).otherwise(pl.lit(""))
    yield Payload(key=NEAR_KEY, expr=expr.implode(), post=_signature_post)
    yield Payload(key=TEXT_KEY, expr=row_hash_expr(cols).implode(),
                  post=lambda v: v if isinstance(v, pl.Series) else pl.Series(v))


@check("dup.near_duplicate", layouts=lay.ANY - {"tabular", "ctc"}, roles=("text|input_ids",))
def _near_shard_stage(ctx: ShardContext) -> Iterable[ShardItem]:
    """Shard stage: skipped when ``[dup] near`` is off, or when the row's document is a text of which
    a declared column is missing (:func:`~datacheck.model.roles.content_gap`: ``[columns] text =
    ["title", "body"]`` on a shard without ``body``; titles alone are not the documents)."""
    if not enabled(ctx.cfg):
        yield Skipped("dup.near_duplicate", "near-duplicate search is off: set [dup] near = true (MinHash LSH over "
                                            "5-gram shingles; threshold [dup] near_threshold, default 0.8)")
    elif (doc := _document(ctx)) is not None and (gap := content_gap(ctx.roles, doc[1])) is not None:
        yield Skipped("dup.near_duplicate", gap)


# ----------------------------------------------------------------------------------------- merge


#: weights of the false positive and false negative probability integrals in :func:`lsh_params`:
#: a band collision is only a candidate (its estimated similarity decides), so a false positive
#: of the banding costs time, a false negative a missed pair
FP_WEIGHT, FN_WEIGHT = 0.1, 0.9


@functools.lru_cache(maxsize=64)
def lsh_params(threshold: float, num_perm: int = NUM_PERM) -> tuple[int, int]:
    """(bands, rows per band) minimising ``FP_WEIGHT`` x the false positive plus ``FN_WEIGHT`` x
    the false negative probability integral at ``threshold`` (datasketch ``MinHashLSH``'s
    optimisation, with weights (0.1, 0.9) instead of its default (0.5, 0.5)): 14 x 9 at 0.8, where a
    pair at similarity 0.8 becomes a candidate with probability 0.87 (0.40 with 9 x 13)."""
    trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz
    grid = np.linspace(0.0, 1.0, 2001)
    best, opt = float("inf"), (1, num_perm)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            p = 1.0 - (1.0 - grid ** r) ** b
            fp = trapezoid(np.where(grid <= threshold, p, 0.0), grid)
            fn = trapezoid(np.where(grid >= threshold, 1.0 - p, 0.0), grid)
            if FP_WEIGHT * fp + FN_WEIGHT * fn < best:
                best, opt = FP_WEIGHT * fp + FN_WEIGHT * fn, (b, r)
    return opt


def _band_keys(sig: np.ndarray, band: int, r: int) -> np.ndarray:
    """uint64 key per row of signature columns ``band*r .. band*r + r - 1``."""
    h = np.full(sig.shape[0], np.uint64(0xCBF29CE484222325))
    with np.errstate(over="ignore"):
        for j in range(band * r, band * r + r):
            h ^= sig[:, j].astype(np.uint64)
            h *= np.uint64(0x100000001B3)
            h = _fmix64(h)
    return h


class ShardSignatures:
    """The signatures of several shards read where they lie (in-memory arrays, or the column-major
    ``.npy`` files a long audit spilled, :class:`~datacheck.io.hashspill.SpilledColumns`, read one
    band's columns at a time): nothing is concatenated, so the dataset stage holds per
    row only 1 byte (``valid``) and 8 (the index of the rows with shingles), plus one band's keys
    at a time; signature rows are gathered only for candidate pairs.

    Args:
        sigs: uint32 [rows_i, NUM_PERM] per shard (an array or a spilled file), in global row order.
        valid: bool [sum of rows_i]: rows that have shingles (others never match).
    """

    def __init__(self, sigs: list[np.ndarray | SpilledColumns], valid: np.ndarray):
        self.sigs = sigs
        self.starts = np.concatenate([[0], np.cumsum([x.shape[0] for x in sigs], dtype=np.int64)]).astype(np.int64)
        self.idx = np.flatnonzero(valid)

    def take(self, pos: np.ndarray) -> np.ndarray:
        """uint32 [len(pos), NUM_PERM]: the signatures of the valid rows at positions ``pos`` of ``idx``."""
        g = self.idx[pos]
        owner = np.searchsorted(self.starts, g, side="right") - 1
        out = np.empty((g.size, NUM_PERM), dtype=np.uint32)
        for s in np.unique(owner):
            m = owner == s
            sig, local = self.sigs[int(s)], g[m] - self.starts[s]
            out[m] = sig.rows(local) if isinstance(sig, SpilledColumns) else sig[local]
        return out

    def band_keys(self, band: int, r: int) -> np.ndarray:
        """uint64 [len(idx)]: every valid row's key of ``band`` (:func:`_band_keys`), shard by shard."""
        out = np.empty(self.idx.size, dtype=np.uint64)
        bounds = np.searchsorted(self.idx, self.starts)
        for s, sig in enumerate(self.sigs):
            lo, hi = int(bounds[s]), int(bounds[s + 1])
            if hi > lo:
                local = self.idx[lo:hi] - self.starts[s]
                cols = (sig.columns(band * r, band * r + r, local) if isinstance(sig, SpilledColumns)
                        else sig[:, band * r:band * r + r][local])
                out[lo:hi] = _band_keys(cols, 0, r)
        return out

    def similarity(self, a: np.ndarray, b: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
        """float64 [len(a)]: the fraction of equal signature values of the pairs of positions (a, b)."""
        out = np.empty(a.size, dtype=np.float64)
        for k in range(0, a.size, chunk):
            out[k:k + chunk] = (self.take(a[k:k + chunk]) == self.take(b[k:k + chunk])).mean(axis=1)
        return out


def _components(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected-component label (the smallest member index) of ``n`` nodes under edges (a, b)."""
    label = np.arange(n, dtype=np.int64)
    if a.size == 0:
        return label
    while True:
        m = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, m)
        np.minimum.at(label, b, m)
        label = label[label]  # pointer jumping
        if np.array_equal(label, before):
            return label


def clusters(sig: np.ndarray, valid: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Near-duplicate clusters of the rows of ``sig`` (uint32 [n, NUM_PERM]).

    Args:
        sig: every row's signature (global row order).
        valid: bool [n]: rows that have shingles (others never match).
        threshold: estimated Jaccard similarity at or above which two rows are linked.

    Returns:
        (rows: int64 indices of every row in a cluster of 2 or more, sorted by (cluster, row);
        cluster label per such row (the cluster's first row); similarity of each row to that first row).
    """
    return shard_clusters(ShardSignatures([sig], valid), threshold)


def shard_clusters(src: ShardSignatures, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`clusters` over the signatures of several shards (:class:`ShardSignatures`), one LSH
    band at a time; rows are global (the shards' rows in order)."""
    idx = src.idx
    empty = np.empty(0, dtype=np.int64)
    if idx.size < 2:
        return empty, empty, np.empty(0)
    bands, r = lsh_params(round(float(threshold), 6))
    ea, eb = [], []
    for band in range(bands):
        keys = src.band_keys(band, r)
        order = np.argsort(keys, kind="stable")
        k = keys[order]
        del keys
        new = np.concatenate([[True], k[1:] != k[:-1]])
        head = np.maximum.accumulate(np.where(new, np.arange(k.size), 0))
        member = ~new
        ea.append(order[head[member]])
        eb.append(order[member])
    a = np.concatenate(ea)
    b = np.concatenate(eb)
    if a.size:
        code = np.unique(np.minimum(a, b) * idx.size + np.maximum(a, b))
        a, b = code // idx.size, code % idx.size
        keep = src.similarity(a, b) >= threshold
        a, b = a[keep], b[keep]
    label = _components(idx.size, a, b)
    size = np.bincount(label, minlength=idx.size)
    inc = np.flatnonzero(size[label] > 1)
    if inc.size == 0:
        return empty, empty, np.empty(0)
    order = np.lexsort((inc, label[inc]))
    rows = inc[order]
    lab = label[rows]
    sims = src.similarity(lab, rows)
    return idx[rows], idx[lab], sims


@check("dup.near_duplicate", level="dataset")
def near_duplicate(dctx: Any) -> Iterable[Finding | Skipped]:
    """``dup.near_duplicate`` over every readable shard's signatures (module docstring).

    count = distinct near-identical documents beyond the first of each cluster; examples: a row
    of each cluster with the first row it resembles and the estimated similarity; ``details``:
    the threshold, LSH bands, and the clusters (first ``max_examples``, members with shard, row,
    split and similarity to the cluster's first row), and how many clusters span splits.
    """
    cfg = dctx.cfg
    if not enabled(cfg):
        return
    shards = [s for s in dctx.readable_shards() if isinstance(s.payload.get(NEAR_KEY), dict)]
    lacking = [s.path for s in dctx.readable_shards() if s not in shards and (s.rows or 0) > 0
               and not any(k.check == "dup.near_duplicate" and not k.error for k in getattr(s, "skipped", ()))]
    if lacking and shards:
        yield Skipped("dup.near_duplicate", f"{len(lacking)} shard(s) have no signatures (no text or input_ids "
                                            f"column, or their check could not run): {', '.join(lacking[:5])}")
    if not shards:
        return
    src = ShardSignatures([s.payload[NEAR_KEY]["sig"] for s in shards],
                          np.concatenate([np.asarray(s.payload[NEAR_KEY]["shingles"]) > 0 for s in shards]))
    offset = src.starts[:-1]
    threshold = float(cfg.dup.near_threshold)
    rows, lab, sims = shard_clusters(src, threshold)
    if rows.size == 0:
        return
    owner = np.searchsorted(src.starts, rows, side="right") - 1
    texts = pl.concat([shards[int(i)].payload[TEXT_KEY].gather(pl.Series(rows[owner == i] - offset[i]))
                       for i in np.unique(owner)])  # grouped by shard: put each back at its row's place
    texts = texts.gather(pl.Series(np.argsort(np.argsort(owner, kind="stable"), kind="stable")))
    frame = pl.DataFrame({"row": rows, "cluster": lab, "sim": sims, "text": texts})
    per = (frame.group_by("cluster", maintain_order=True)
           .agg(pl.col("text").n_unique().alias("distinct"), pl.len().alias("size"))
           .filter(pl.col("distinct") > 1))
    if per.height == 0:
        return  # only exact copies: dup.exact_in_shard / dup.exact_across_shards report them
    count = int((per["distinct"] - 1).sum())
    splits = getattr(dctx, "splits", {}) or {}
    max_ex = cfg.report.max_examples

    def where(g: int) -> dict[str, Any]:
        i = int(np.searchsorted(src.starts, g, side="right") - 1)
        s = shards[i]
        out = {"shard": s.path, "row": int(g - offset[i])}
        if splits:
            out["split"] = splits.get(s.path)
        return out

    listed, examples, spanning, involved = [], [], 0, set()
    keep = set(per["cluster"].to_list())
    members = frame.filter(pl.col("cluster").is_in(pl.Series(sorted(keep)).implode()))
    for (cid,), grp in members.group_by("cluster", maintain_order=True):
        info = [where(int(g)) | {"similarity": round(float(x), 4)} for g, x in zip(grp["row"], grp["sim"])]
        involved.update(m["shard"] for m in info)
        if splits and len({m.get("split") for m in info}) > 1:
            spanning += 1
        if len(listed) < max_ex:
            listed.append({"size": len(info), "rows": info[:max_ex]})
        if len(examples) < max_ex:
            first, second = info[0], info[1]
            examples.append(Example(row=second["row"], value=(
                f"{second['shard']} row {second['row']} ~ {first['shard']} row {first['row']} "
                f"(estimated Jaccard {second['similarity']:.2f})")))
    total = sum(s.rows or 0 for s in shards)
    bands, r = lsh_params(round(threshold, 6))
    span = f"; {spanning} cluster(s) span splits (leakage)" if splits else ""
    yield finding(
        "dup.near_duplicate", count=count, ratio=count / total if total else None,
        shards=tuple(sorted(involved)), examples=tuple(examples), rows_truncated=count > len(examples),
        message=(f"{count} row(s) are near-duplicates (estimated Jaccard similarity of 5-gram shingles >= "
                 f"{threshold:g}) of another row, in {per.height} cluster(s){span}"),
        details={"threshold": threshold, "num_perm": NUM_PERM, "bands": bands, "rows_per_band": r,
                 "shingles": f"{SHINGLE}-grams of characters (text) or token ids", "clusters": listed,
                 "cluster_count": per.height, "clusters_spanning_splits": spanning},
    )
