"""Check registry: one producer per check ID.

A check is one function registered with the ID it emits and the roles and facts it needs::

    @check("tokens.out_of_vocab", layouts=TOKENIZED, roles=("input_ids",), facts=("tokens.vocab_size",))
    def out_of_vocab(ctx: ShardContext) -> Iterable[ShardItem]: ...

The registry, not the function, lists the check as :class:`~datacheck.model.findings.Skipped`
when a declared role is absent (the role table's reason, e.g. "no input_ids column (set [columns]
input_ids)"), when a declared fact (config ``section.key``) is unset ("[tokens] vocab_size is not
set"), or when a declared role's column has a dtype that cannot serve the role (the
``schema.dtype`` reason). Only then is the function called.

A shard-level check function receives a :class:`ShardContext` and yields items of its own ID only:

- :class:`RowCheck`: a boolean polars expression per row (True = the row fails), fused by the
  engine with every other check of the shard into ONE lazy query;
- :class:`~datacheck.model.findings.Finding`: a shard-level finding decided from the schema alone;
- :class:`AfterQuery`: a shard-level verdict decided from the row count after the fused query;
- :class:`~datacheck.model.findings.Skipped`: the check cannot run here, and why.

Measurements that are not a check (:class:`Stat` for the shard's ``stats``, :class:`Payload` for
the merge) are registered with :func:`measure`. Dataset-level checks (``level="dataset"``) receive
the :class:`~datacheck.model.results.DatasetContext` and yield Findings and Skipped of their ID.
The hook for a shard that cannot be read at all is registered with :func:`on_unreadable`.

Every ID is a catalog ID (:mod:`datacheck.model.catalog`); each has exactly one producer (a shard
stage, a dataset stage, or both, in one module).

A family whose checks or measurements read columns the read path derives (the Alpaca layout's
``messages``, the chat template's ``input_ids``/``assistant_mask``/``labels``, rendered preference
pairs: :data:`datacheck.derive.read.DERIVATIONS`) declares them with :func:`derives`;
:func:`needed_derivations` is the set the engine asks the read path for.

The spec types live in :mod:`datacheck.checks.spec`, the merge combinators in
:mod:`datacheck.checks.merge` and the shared-pass memo in :mod:`datacheck.checks.memo`; this module
re-exports their public names, so a check module imports everything it writes from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from datacheck.checks.memo import clear_shared_passes, shared_column, shared_pass, shared_roots, with_shared_columns
from datacheck.checks.merge import (
    concat_parts,
    counts_parts,
    fields_parts,
    first_part,
    max_parts,
    min_parts,
    moments_parts,
    ratio,
    ratio_post,
    sum_parts,
)
from datacheck.checks.spec import (
    AfterQuery,
    CheckSpec,
    FlatView,
    MeasureItem,
    Payload,
    Repeats,
    RowAgg,
    RowCheck,
    RowsKey,
    ShardContext,
    ShardItem,
    Stat,
    fact_value,
    finding,
)
from datacheck.derive.read import DERIVATIONS
from datacheck.model import catalog
from datacheck.model.errors import InternalError, ReportVersionError, UsageError
from datacheck.model.findings import Finding, Skipped
from datacheck.model.layouts import LAYOUTS
from datacheck.model.roles import ROLE_SPECS, role_dtype_problems

__all__ = [
    "ShardContext",
    "RowCheck",
    "FlatView",
    "RowAgg",
    "Stat",
    "Payload",
    "Repeats",
    "AfterQuery",
    "RowsKey",
    "ShardItem",
    "ShardPlan",
    "CheckSpec",
    "check",
    "measure",
    "on_unreadable",
    "derives",
    "needed_derivations",
    "DERIVES",
    "CHECKS",
    "MEASURES",
    "UNREADABLE",
    "READER_IDS",
    "fact_value",
    "finding",
    "shard_plan",
    "dataset_items",
    "unreadable_findings",
    "sum_parts",
    "min_parts",
    "max_parts",
    "first_part",
    "concat_parts",
    "counts_parts",
    "fields_parts",
    "moments_parts",
    "ratio",
    "ratio_post",
    "shared_pass",
    "clear_shared_passes",
    "shared_column",
    "shared_roots",
    "with_shared_columns",
]


#: check ID -> its producer (filled by the family modules' decorators)
CHECKS: dict[str, CheckSpec] = {}
#: measurements (stats and payloads) by name, in registration order
MEASURES: dict[str, Callable[[ShardContext], Iterable[MeasureItem]]] = {}
#: family module -> the derivations of the read path its checks and measurements read (:func:`derives`)
DERIVES: dict[str, frozenset[str]] = {}
#: check ID -> the hook for a shard that cannot be read (``fn(shard, format, reason) -> findings``)
UNREADABLE: dict[str, Callable[[str, str, str], Iterable[Finding]]] = {}
#: IDs the shard reader itself produces while opening (``ShardData.decode_findings``): ID -> producer module
READER_IDS: dict[str, str] = {"decode.bad_record": "datacheck.formats", "decode.invalid_utf8": "datacheck.formats"}


def _register(cid: str, stage: str, fn: Callable, roles: tuple[str, ...], facts: tuple[str, ...],
              reasons: dict[str, str] | None, dtype_roles: tuple[str, ...] | None,
              layouts: Iterable[str] | None, reads_tokens: bool = False,
              layout_roles: dict[str, tuple[str, ...]] | None = None) -> None:
    if not catalog.is_known(cid):
        raise InternalError(f"check {cid!r} ({fn.__module__}.{fn.__name__}) is not in the catalog (CHECKS.md)")
    if layouts is not None:
        unknown = sorted(set(layouts) - set(LAYOUTS))
        if unknown or not set(layouts):
            raise InternalError(f"check {cid!r}: layouts must be names of {sorted(LAYOUTS)}, got {sorted(layouts)}")
    for f in (alt for fact in facts for alt in fact.split("|")):
        section, _, key = f.partition(".")
        if not key:
            raise InternalError(f"check {cid!r}: fact {f!r} must be written section.key")
    for r in (*roles, *(x for rs in (layout_roles or {}).values() for x in rs)):
        for name in r.split("|"):
            if name not in ROLE_SPECS:
                raise InternalError(f"check {cid!r}: unknown role {name!r}")
    if layout_roles and (set(layout_roles) - set(LAYOUTS) or set(layout_roles) - set(layouts or ())):
        raise InternalError(f"check {cid!r}: layout_roles names layouts it does not apply to: {sorted(layout_roles)}")
    old = CHECKS.get(cid)
    if old is not None:
        if old.module != fn.__module__:
            raise InternalError(f"check {cid!r} has two producers: {old.module} and {fn.__module__}")
        if getattr(old, stage) is not None and getattr(old, stage) is not fn:
            raise InternalError(f"check {cid!r} has two {stage}-stage functions in {fn.__module__}")
    if dtype_roles is None:
        dtype_roles = tuple(r for r in roles if "|" not in r)
    base = old if old is not None else CheckSpec(id=cid, module=fn.__module__)
    if old is None and layouts is None:
        raise InternalError(f"check {cid!r} ({fn.__module__}.{fn.__name__}) declares no layouts: write "
                            "layouts=ANY (or the layouts it applies to, datacheck.model.layouts)")
    if old is not None and layouts is not None and frozenset(layouts) != old.layouts:
        raise InternalError(f"check {cid!r}: its shard and dataset stages declare different layouts")
    lay = frozenset(layouts) if layouts is not None else base.layouts
    if stage == "shard":
        CHECKS[cid] = CheckSpec(cid, tuple(roles), tuple(facts), tuple((reasons or {}).items()) + base.reasons,
                                tuple(dtype_roles), fn, base.dataset, fn.__module__, base.dataset_facts, lay,
                                reads_tokens, tuple((k, tuple(v)) for k, v in (layout_roles or {}).items()))
    else:
        if roles:
            raise InternalError(f"check {cid!r}: a dataset-stage check declares facts, not roles")
        CHECKS[cid] = CheckSpec(cid, base.roles, base.facts, base.reasons + tuple((reasons or {}).items()),
                                base.dtype_roles, base.shard, fn, fn.__module__, tuple(facts), lay,
                                base.reads_tokens, base.layout_roles)


def check(cid: str, *, roles: tuple[str, ...] = (), facts: tuple[str, ...] = (), level: str = "shard",
          reasons: dict[str, str] | None = None, dtype_roles: tuple[str, ...] | None = None,
          layouts: Iterable[str] | None = None, reads_tokens: bool = False,
          layout_roles: dict[str, tuple[str, ...]] | None = None) -> Callable:
    """Register the producer of check ``cid``.

    Args:
        cid: a catalog ID (InternalError otherwise, at import).
        roles: roles the check needs (``"label|labels"``: either); absent -> skipped with the role
            table's reason.
        facts: config facts it needs (``"tokens.vocab_size"``); unset -> skipped "[tokens]
            vocab_size is not set".
        level: ``"shard"`` (``fn(ShardContext)``, yields RowCheck/Finding/AfterQuery/Skipped) or
            ``"dataset"`` (``fn(DatasetContext)``, yields Finding/Skipped, after every shard). One ID
            may have one function of each level, in the same module.
        reasons: skip reasons by role or fact name, replacing the derived ones.
        dtype_roles: the declared roles whose column must have a dtype that serves the role
            (default: every declared single role; ``()`` to check dtypes in the function).
        layouts: the layouts the check applies to (:mod:`datacheck.model.layouts`: ``ANY`` or a
            group such as ``SFT``); required at an ID's first registration (InternalError without);
            its other stage may repeat it or leave it out. On a shard of another known layout the
            check is not applicable: neither run nor skipped, counted in ``ShardPlan.not_applicable``.
            Nor is it where the shard is the form of its layout without a role the check declares
            (:meth:`CheckSpec.other_form`, :data:`~datacheck.model.layouts.OPTIONAL_ROLES`).
        reads_tokens: the check finds the row's token-id columns itself (``tokens.out_of_vocab``): its
            declared ``input_ids`` role is met by any token-id column
            (:func:`~datacheck.model.roles.token_id_columns`, :meth:`CheckSpec.present_roles`).
        layout_roles: ``{layout: roles}``: the roles the check needs in a shard of that layout
            instead of ``roles`` (a layout of ``layouts``; InternalError otherwise, at import):
            the check runs there without the roles only the other layouts' rule reads.
    """
    if level not in ("shard", "dataset"):
        raise InternalError(f"check {cid!r}: level must be 'shard' or 'dataset', not {level!r}")

    def deco(fn: Callable) -> Callable:
        _register(cid, level, fn, tuple(roles), tuple(facts), reasons,
                  dtype_roles if level == "shard" else (), layouts, reads_tokens, layout_roles)
        return fn

    return deco


def derives(module: str, *derivations: str) -> None:
    """Declare that the checks and measurements of the family ``module`` read the columns the read
    path derives by ``derivations`` (names of :data:`datacheck.derive.read.DERIVATIONS`).

    Raises:
        InternalError: an unknown derivation name (at import).
    """
    unknown = sorted(set(derivations) - DERIVATIONS)
    if unknown:
        raise InternalError(f"{module} declares unknown derivations {unknown}; known: {sorted(DERIVATIONS)}")
    DERIVES[module] = DERIVES.get(module, frozenset()) | frozenset(derivations)


def needed_derivations(only: Iterable[str] | None = None) -> frozenset[str]:
    """The derivations the read path runs for the registered shard-stage checks (those in ``only``,
    or all) and every measurement: the union of what their families declared with :func:`derives`."""
    wanted = set(only) if only is not None else None
    modules = {spec.module for cid, spec in CHECKS.items()
               if spec.shard is not None and (wanted is None or cid in wanted)}
    modules |= {fn.__module__ for fn in MEASURES.values()}
    return frozenset().union(*(DERIVES.get(m, frozenset()) for m in modules))


def measure(name: str) -> Callable:
    """Register a measurement ``fn(ShardContext) -> Iterable[Stat | Payload]`` (shard stats for the
    report, payloads for the merge). Measurements are not checks: they never skip or find."""

    def deco(fn: Callable) -> Callable:
        if name in MEASURES and MEASURES[name] is not fn:
            raise InternalError(f"measurement {name!r} registered twice")
        MEASURES[name] = fn
        return fn

    return deco


def on_unreadable(cid: str) -> Callable:
    """Register the hook for a shard that cannot be read: ``fn(shard, format, reason) -> findings``."""

    def deco(fn: Callable) -> Callable:
        if not catalog.is_known(cid):
            raise InternalError(f"unreadable hook {cid!r} is not in the catalog")
        if cid in CHECKS or (cid in UNREADABLE and UNREADABLE[cid] is not fn):
            raise InternalError(f"check {cid!r} has two producers")
        UNREADABLE[cid] = fn
        return fn

    return deco


@dataclass
class ShardPlan:
    """Everything the registered checks and measurements want from one shard, by kind."""

    row_checks: list[RowCheck] = field(default_factory=list)
    stats: list[Stat] = field(default_factory=list)
    payloads: list[Payload] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    after: list[AfterQuery] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: the shard-stage checks that do not apply to the shard's layout (IDs, registration order)
    not_applicable: list[str] = field(default_factory=list)


def _own(spec_id: str, item: Any) -> Any:
    if getattr(item, "check", spec_id) != spec_id:
        raise InternalError(f"the producer of {spec_id!r} yielded an item of {item.check!r}: one producer per ID")
    return item


def shard_plan(ctx: ShardContext, only: set[str] | None = None, measures: bool = True) -> ShardPlan:
    """Run every registered shard-stage check (or those in ``only``) and measurement on ``ctx``.

    Raises:
        InternalError: a check yielded an item of another ID, or an object that is no shard item.
    """
    plan = ShardPlan()
    probs_cache: list[Any] = []

    def problems() -> Any:
        if not probs_cache:
            lab = ctx.cfg.labels
            probs_cache.append(role_dtype_problems(ctx.roles, ctx.schema, num_classes=lab.num_classes,
                                                   classes=tuple(lab.classes) if lab.classes is not None else None,
                                                   shard=ctx.shard))
        return probs_cache[0]

    for cid, spec in CHECKS.items():
        if spec.shard is None or (only is not None and cid not in only):
            continue
        if not spec.applies(ctx.layout) or spec.other_form(ctx) is not None:
            plan.not_applicable.append(cid)
            continue
        why = spec.unmet(spec.present_roles(ctx), ctx.cfg, problems, ctx.layout)
        if why is not None:
            plan.skipped.append(Skipped(cid, why))
            continue
        try:
            items = list(spec.shard(ctx))
        except (UsageError, ReportVersionError, MemoryError):  # the user's error (exit 2); memory: OutOfMemory
            raise
        except Exception as exc:  # noqa: BLE001 - a raising check function is a check error, not a crash
            plan.skipped.append(_raised(cid, spec.shard, exc))
            continue
        for item in items:
            item = _own(cid, item)
            if isinstance(item, RowCheck):
                plan.row_checks.append(item)
            elif isinstance(item, Finding):
                plan.findings.append(item)
            elif isinstance(item, Skipped):
                plan.skipped.append(item)
            elif isinstance(item, AfterQuery):
                plan.after.append(item)
            else:
                raise InternalError(f"check {cid!r} yielded {type(item).__name__}; measurements go in @measure")
    if measures:
        for name, fn in MEASURES.items():
            try:
                measured = list(fn(ctx))
            except (UsageError, ReportVersionError, MemoryError):
                raise
            except Exception as exc:  # noqa: BLE001 - a raising measurement is a check error, not a crash
                plan.skipped.append(_raised(f"stats.{name}", fn, exc))
                continue
            for item in measured:
                if isinstance(item, Stat):
                    plan.stats.append(item)
                elif isinstance(item, Payload):
                    plan.payloads.append(item)
                else:
                    raise InternalError(f"measurement {name!r} yielded {type(item).__name__}, not a Stat or Payload")
    return plan


def _raised(cid: str, fn: Any, exc: BaseException) -> Skipped:
    """The check error entry of a check (or measurement) function that raised: never a silent pass."""
    first = (str(exc).splitlines() or [""])[0]
    return Skipped(cid, f"check function {getattr(fn, '__name__', fn)!r} raised {type(exc).__name__}: {first}",
                   error=True)


def dataset_items(dctx: Any) -> Iterator[Finding | Skipped]:
    """Every registered dataset-stage check on ``dctx`` (a check whose roles or facts are unmet is skipped
    with the reason; one whose function raises is a check error). A check that applies to none of the
    readable shards' layouts (every one known) is not run and not listed."""
    layouts = {(s.layout or {}).get("name") for s in dctx.shards if s.readable}
    for cid, spec in CHECKS.items():
        if spec.dataset is None:
            continue
        if layouts and not any(spec.applies(lay) for lay in layouts):
            continue
        why = spec.unmet_dataset(dctx.cfg)
        if why is not None:
            yield Skipped(cid, why)
            continue
        try:
            items = list(spec.dataset(dctx))
        except (UsageError, ReportVersionError, MemoryError):  # bad input (e.g. a shipped index): exit 2; memory
            raise
        except Exception as exc:  # noqa: BLE001 - a raising check function is a check error, not a crash
            yield _raised(cid, spec.dataset, exc)
            continue
        for item in items:
            yield _own(cid, item)


def unreadable_findings(shard: str, fmt: str, reason: str) -> list[Finding]:
    """The findings of a shard that cannot be read (``shard``: its relative path, ``fmt``: its format)."""
    return [f for fn in UNREADABLE.values() for f in fn(shard, fmt, reason)]
