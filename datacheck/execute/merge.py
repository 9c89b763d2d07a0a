"""Merging part reports (``datacheck audit --num-parts N --part k``) into the single-job report.

Each part report comes with its results sidecar (:mod:`datacheck.execute.parts`). The merge checks that
the parts belong together (same config, same datacheck code, same shard list: relative paths and
sizes; the report keys each shard by relative path and content hash; the absolute audited root may
differ, e.g. two CI checkouts of the same data; every part from
``0`` to ``N-1`` exactly once, every shard audited by exactly one part), puts the shard results
back in discovery order and runs the dataset-level checks over them
(:func:`datacheck.execute.audit.finish_report`): the result equals a single-job audit of the same data
(``created_at`` aside).

:func:`store_part_results` (``datacheck merge --cache-dir DIR``) writes every part's shard results
into one result cache, under the keys the parts' audits use (their salt and each shard's context,
recorded in the sidecars): restored by every part job of the next run, it answers each unchanged
shard whichever part it lands in, also a shard renamed or renumbered within its folder (the
cache's move records), where per-part cache folders would miss every shard that changed part.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import xxhash

from datacheck.execute.audit import finish_report
from datacheck.execute.cache import CorruptEntry, ShardCache, decode_results
from datacheck.execute.parts import PART_KIND
from datacheck.io.dataindex import parse_index
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.model.config import config_from_dict
from datacheck.model.constants import FAIL_ON
from datacheck.model.errors import UsageError
from datacheck.report.model import Report, read_report

__all__ = ["PartInput", "load_part", "expand_part_paths", "merge_parts", "merge_part_inputs", "store_part_results"]


class PartInput:
    """One part read back: the part report, its shard results and the sidecar's meta."""

    def __init__(self, path: Path, report: Report, results: list[Any], meta: dict[str, Any]):
        self.path = path
        self.report = report
        self.results = results
        self.meta = meta


def expand_part_paths(paths: list[str]) -> list[Path]:
    """Part report files; a folder stands for every ``*.json`` below it that is a part report.

    Raises:
        UsageError: a path does not exist, or a folder holds no part report.
    """

    out: list[Path] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = []
            for f in sorted(p.rglob("*.json")):
                try:
                    d = read_json_file(f)
                except (OSError, JsonInputError):
                    continue
                if isinstance(d, dict) and isinstance(d.get("part"), dict):
                    found.append(f)
            if not found:
                raise UsageError(f"{arg}: no part report (*.json with a 'part' object) in this folder")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"{arg}: no such part report file or folder")
    return out


def load_part(path: str | Path) -> PartInput:
    """Read a part report and its results sidecar.

    Raises:
        UsageError: not a part report, the sidecar is missing, does not match the report's
            digest, or is corrupt.
        ReportVersionError: the report is newer than this datacheck reads.
    """
    path = Path(path)
    report = read_report(path)
    part = report.part
    if not isinstance(part, dict) or "results_file" not in part:
        raise UsageError(f"{path}: not a part report (no 'part' object); merge takes the reports written by "
                         "'datacheck audit --num-parts N --part k'")
    side = path.with_name(str(part["results_file"]))
    try:
        data = side.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: its results file {side} is missing; upload and download it together with the "
                         "part report (same folder)") from None
    except OSError as exc:
        raise UsageError(f"{side}: cannot read ({exc.strerror or exc})") from None
    digest = "xxh3-128:" + xxhash.xxh3_128_hexdigest(data)
    if digest != part.get("results_digest"):
        raise UsageError(f"{side} does not belong to {path} (digest {digest}, the report expects "
                         f"{part.get('results_digest')}); re-run that part")
    try:
        results, meta = decode_results(data)
    except CorruptEntry as exc:
        raise UsageError(f"{side}: corrupt results file ({exc}); re-run that part") from None
    if meta.get("kind") != PART_KIND:
        raise UsageError(f"{side}: not a part results file")
    return PartInput(path, report, results, meta)


def merge_parts(paths: list[str | Path], fail_on: str | None = None, allow_check_errors: bool = False) -> Report:
    """Merge part reports into the report a single job would have written.

    Args:
        paths: part report files (their sidecars beside them).
        fail_on: override of the parts' ``--fail-on``; None: the parts' value (they must agree).
        allow_check_errors: as in :func:`datacheck.api.audit` (check errors of the parts' shards
            and of the dataset-level checks fail the merged report unless True).

    Raises:
        UsageError: parts from different audits (config, code, shard list or ``num_parts`` differ),
            a part missing or given twice, a shard audited by no part or by two.
    """
    if not paths:
        raise UsageError("merge needs at least one part report")
    return merge_part_inputs([load_part(p) for p in paths], fail_on=fail_on, allow_check_errors=allow_check_errors)


def merge_part_inputs(parts: list[PartInput], fail_on: str | None = None, allow_check_errors: bool = False) -> Report:
    """:func:`merge_parts` over parts already read with :func:`load_part`."""
    if not parts:
        raise UsageError("merge needs at least one part report")
    first = parts[0].meta
    for p in parts[1:]:
        for key, what in [("num_parts", "--num-parts"), ("config_hash", "config"), ("datacheck_version",
                          "datacheck version"), ("code", "datacheck code"), ("polars", "polars version"),
                          ("all_shards", "shard list (the data changed between the jobs?)"),
                          ("all_bytes", "shard sizes (the data changed between the jobs?)"),
                          ("index", "[dataset] index file")]:
            if p.meta.get(key) != first.get(key):
                raise UsageError(f"{p.path} and {parts[0].path} come from different audits: their {what} differ; "
                                 "run every part with the same data, config and datacheck")
    n = first["num_parts"]
    seen: dict[int, Path] = {}
    for p in parts:
        k = p.meta["part"]
        if k in seen:
            raise UsageError(f"part {k} given twice: {seen[k]} and {p.path}")
        seen[k] = p.path
    missing = sorted(set(range(n)) - set(seen))
    if missing:
        raise UsageError(f"parts {missing} of {n} are missing (got {sorted(seen)}); merge needs every part 0..{n - 1}")
    fail_ons = {p.meta["fail_on"] for p in parts}
    if fail_on is None:
        if len(fail_ons) > 1:
            raise UsageError(f"the parts were run with different --fail-on ({sorted(fail_ons)}); pass --fail-on to merge")
        fail_on = fail_ons.pop()
    if fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {FAIL_ON}, got {fail_on!r}")
    by_path: dict[str, Any] = {}
    for p in parts:
        for r in p.results:
            if r.path in by_path:
                raise UsageError(f"shard {r.path} was audited by two parts; re-run the parts with one --num-parts")
            by_path[r.path] = r
    order = first["all_shards"]
    absent = [s for s in order if s not in by_path]
    extra = sorted(set(by_path) - set(order))
    if absent or extra:
        raise UsageError(f"the parts do not cover the shard list: {len(absent)} shard(s) not audited "
                         f"({', '.join(absent[:5])}), {len(extra)} unexpected ({', '.join(extra[:5])})")
    cfg = config_from_dict(first["config"], source=f"{parts[0].path} (config of the parts)")
    if cfg.hash() != first["config_hash"]:
        raise UsageError(f"{parts[0].path}: the stored config does not reproduce its config_hash; re-run the parts "
                         "with this datacheck")
    cfg._from_tokenizer = first.get("tokenizer_facts")  # which [tokens] facts the parts took from the tokenizer
    cfg._from_data = first.get("label_facts")  # the [labels] class count the parts took from the data's ClassLabel
    results = [by_path[s] for s in order]
    # the parts may have run in different checkouts of the same data: use a root that exists here
    root = next((Path(p.meta["root"]) for p in parts if Path(p.meta["root"]).is_dir()), Path(first["root"]))
    index = None
    if first.get("index") is not None:
        source = Path(first["index"]["source"])  # relative to the root when the index lies inside it
        index = parse_index(first["index"]["data"], root, str(source if source.is_absolute() else root / source))
    return finish_report(cfg, results, root=root, temp_files=first["temp_files"], fail_on=fail_on, index=index,
                         config_path=first.get("config_path"), ignored=first.get("ignored", []),
                         shard_lists=first.get("shard_lists", []),
                         allow_check_errors=allow_check_errors)


def store_part_results(parts: list[PartInput], cache_dir: str | Path, prune: bool = False) -> tuple[int, list[Path]]:
    """Store the parts' shard results in the result cache at ``cache_dir`` (module docstring), each
    under the key its part's audit used (:meth:`~datacheck.execute.cache.ShardCache.key` with the
    part's recorded salt and the shard's context), with its move record where the result names no
    path. Only the shards the part recorded are stored (:func:`~datacheck.execute.parts.cache_record`:
    never a result with check errors, nor one of a shard that could not be read). Call it on parts
    :func:`merge_part_inputs` accepted.

    Args:
        parts: the parts read with :func:`load_part`.
        cache_dir: the cache folder (created when missing).
        prune: then delete every entry of the folder not written here (:meth:`ShardCache.prune`):
            the folder holds the results of this run's shards only. Nothing is deleted when no part
            recorded cache keys (nothing was written: an emptied folder would only cost re-reads).

    Returns:
        (shard results stored, the parts whose sidecar records no cache keys, written by a datacheck
        before ``merge --cache-dir``: none of their results stored).

    Raises:
        UsageError: ``cache_dir`` cannot be created or is read-only.
    """
    used: set[str] = set()
    caches: dict[str, ShardCache] = {}
    stored = 0
    without: list[Path] = []
    for p in parts:
        rec = p.meta.get("cache")
        if (not isinstance(rec, dict) or not isinstance(rec.get("salt"), str)
                or not isinstance(rec.get("shards"), dict)):
            without.append(p.path)
            continue
        salt = rec["salt"]
        if salt not in caches:
            caches[salt] = ShardCache(cache_dir, None, salt=salt)
            caches[salt].used = used  # one set: prune keeps what any salt's entries wrote
        cache, cross_shard = caches[salt], bool(rec.get("cross_shard", True))
        for r in p.results:
            if r.path not in rec["shards"] or r.check_errors:
                continue
            context = rec["shards"][r.path]
            context = context if isinstance(context, str) else None
            before = cache.stats.writes
            cache.put(cache.key(r.path, r.format, r.content_hash, cross_shard=cross_shard, context=context), r,
                      cross_shard=cross_shard, context=context)
            stored += cache.stats.writes - before  # a failed write is said by a CacheWarning
    if prune and caches:
        next(iter(caches.values())).prune()
    return stored, without
