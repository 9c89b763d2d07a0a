"""The audit's set-up, shared by every entry point (``audit``, parts, ``inspect``, ``clean``,
``schema infer``): which config file applies, the validated config, and (:func:`prepare_audit`)
everything an audit checks before it reads any shard."""
from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from datacheck.contracts import load_contract
from datacheck.derive.classlabel import with_declared_classes
from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.execute.cache import CacheWarning, ShardCache
from datacheck.execute.configpath import MAX_CONFIG_LEVELS, VCS_MARKERS, resolve_config_path
from datacheck.formats.discovery import discover
from datacheck.io.dataindex import DataIndex, read_index, resolve_index_path
from datacheck.io.discover import Discovery
from datacheck.model.config import Config, config_from_dict, load_config
from datacheck.model.constants import FAIL_ON, is_python_schema
from datacheck.model.errors import ConfigError, UsageError

__all__ = ["MAX_CONFIG_LEVELS", "VCS_MARKERS", "resolve_config_path", "config_and_source", "AuditOptions",
           "with_declared_splits", "check_contract",
           "FROM_CONFIG", "AuditSetup", "prepare_audit", "data_config"]


def _coerce_config(config: Config | str | Path | dict | None) -> Config:
    return config_and_source(config)[0]


def config_and_source(config: Config | str | Path | dict | None, paths: Iterable[str | Path] = (),
                      allow_python_schema: bool = False) -> tuple[Config, str | None]:
    """(validated config, the file it came from or None). A :class:`Config` or a dict given in memory
    has no file (None); ``config=None`` resolves like the CLI (:func:`resolve_config_path` over
    ``paths``), None again when no file is found (the defaults).

    A config found by the lookup (``config=None``) may not name a Python schema file (it executes
    code) unless ``allow_python_schema``; one the caller names (a path, a Config, a dict) may.

    Raises:
        ConfigError: the file is missing, not TOML, has a bad key, or is a found config naming a
            Python schema.
    """
    if isinstance(config, Config):
        return config, None
    if isinstance(config, dict):
        return config_from_dict(config, source="config"), None
    source = resolve_config_path(config, paths)
    # A config the caller named may run its Python schema; one found next to the data may not.
    trusted = config is not None or allow_python_schema
    return (load_config(source, allow_python_schema=trusted) if source is not None else Config()), source


class ConfigPathFrom(enum.Enum):
    """The value of :func:`datacheck.api.audit`'s ``config_path`` that means "the file ``config`` was
    given or found as" (:data:`FROM_CONFIG`), as opposed to a path or None given by the caller."""

    CONFIG = "config"


#: ``config_path=FROM_CONFIG``: the report names the config file given or found (None for a Config or dict).
FROM_CONFIG = ConfigPathFrom.CONFIG


@dataclass(frozen=True)
class AuditOptions:
    """How one audit runs, built once from the flags (``datacheck audit``) or the keyword arguments
    (:func:`datacheck.api.audit`) and passed whole to :func:`prepare_audit` and to both the single-job
    audit (:func:`datacheck.execute.audit.run_audit`) and a part audit
    (:func:`datacheck.execute.parts.audit_part`): neither takes an option of its own, so a part
    audits exactly the shards the single job audits, with the same settings.

    Attributes:
        fail_on: ``"error"``, ``"warn"`` or ``"never"``: the lowest severity that fails the gate.
        config_path: the config file the report names (None: defaults, a Config or a dict).
        cache_dir: the per-shard result cache folder, or None (no cache).
        prune_cache: after the audit, delete the cache entries it did not use.
        trust_mtime: with a cache, a local shard file whose size, modification and status-change
            times and inode are those recorded with its content hash is not hashed again
            (:mod:`datacheck.execute.cache`, "File identities"); False: every shard is hashed.
        allow_check_errors: a check that fails internally does not fail the gate.
        workers: worker processes (None: ``$DATACHECK_WORKERS``, else one per core).
        executor: ``"local"``, ``"process"``, ``"ray"`` or None (picked from ``workers``).
        ray_address: the Ray cluster ``executor="ray"`` joins (None: Ray started in this process).
        follow_symlinks: read shards reached through symlinks that lead outside the audited root.
        against: another dataset (files, folders or globs) whose row content the audited rows are
            compared with (``dup.split_overlap``); empty: none. A part audit refuses it.
    """

    fail_on: str = "error"
    config_path: str | None = None
    cache_dir: str | Path | None = None
    prune_cache: bool = False
    trust_mtime: bool = False
    allow_check_errors: bool = False
    workers: int | None = None
    executor: str | None = None
    ray_address: str | None = None
    follow_symlinks: bool = False
    against: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditSetup:
    """What an audit knows before it reads any shard (shared by :func:`datacheck.execute.audit.run_audit`
    and :func:`datacheck.execute.parts.audit_part`).

    Attributes:
        cfg: the validated config, with ``[splits]`` filled from a Hugging Face ``DatasetDict`` folder's
            ``dataset_dict.json``, or from the Hub's split file names, when the config names no split (see
            :func:`with_declared_splits`; the report's config hash shows them).
        disc: the discovered shards (all of them; a part selects its own).
        cache: the per-shard result cache, or None.
        index: the committed ``[dataset] index`` (read and validated), or None.
        index_path: where that index file is, or None.
    """

    cfg: Config
    disc: Discovery
    cache: ShardCache | None
    index: DataIndex | None
    index_path: Path | None


def with_declared_splits(cfg: Config, disc: Discovery, *, against: bool = False) -> Config:
    """``cfg`` with ``[splits]`` filled from the splits the data gives when the config names no split
    (:meth:`Discovery.declared_splits`): those a Hugging Face ``DatasetDict`` folder among the
    discovered shards declares (its ``dataset_dict.json``), else, unless ``[dataset] infer_splits``
    is false or the audit compares with an ``--against`` dataset (``against``), those the shards'
    names give by the Hugging Face Hub's split naming (:mod:`datacheck.io.hubsplits`: ``train-*``,
    ``data/test-*``, ``validation/``). An explicit ``[splits]``, or data giving none, leaves ``cfg`` as
    it is. ``audit``, ``merge`` parts and ``clean`` use the same splits, so test rows found in the
    train split are ``dup.split_overlap`` in every one of them, exactly as with the same ``[splits]``
    written in the config."""
    if cfg.splits:
        return cfg
    infer = cfg.dataset.infer_splits and not against
    declared, source = disc.splits_given(infer=infer)
    if not declared or source is None:
        return cfg
    return cfg.with_data_splits(declared, source, card_note=disc.card_note(infer) if source == "hub_names" else None)


def check_contract(cfg: Config, config_path: str | None) -> None:
    """Load the data contract ``[dataset] schema`` names (if any), before any shard is read, as every
    verb that runs the checks does (audit, inspect, clean).

    Raises:
        ConfigError: the contract cannot be loaded (unknown layout name, missing file, bad YAML, ...);
            the message names where it was given: ``--schema``, or the config file and its key
            (:meth:`Config.schema_source`).
    """
    spec = cfg.schema_spec()
    if spec is None:
        return
    try:
        load_contract(spec)
    except ConfigError as exc:
        raise ConfigError(f"{cfg.schema_source(config_path)}: {exc}", key=exc.key) from None


def prepare_audit(paths: Iterable[str | Path], cfg: Config, opts: AuditOptions) -> AuditSetup:
    """Every check an audit makes before reading shards, in one place: ``fail_on``, the data contract
    (``[dataset] schema``), the cache folder, discovery of the shards, the splits a ``DatasetDict``
    folder declares or the shards' names give (used as ``[splits]`` when the config has none:
    :func:`with_declared_splits`), the class count a Hugging Face ``ClassLabel`` declares for the label
    column (``[labels] num_classes`` when the config gives no class domain:
    :func:`datacheck.derive.classlabel.with_declared_classes`), and the committed data index.

    Raises:
        UsageError: ``fail_on`` is not one of ``error|warn|never``; a path does not exist or holds no
            shard; ``cache_dir`` is read-only; the index file is missing, not JSON, of a newer format
            or lists a path outside the audited root.
        ConfigError: the contract cannot be loaded (unknown layout, bad YAML, ...).

    ``opts.follow_symlinks``: read shards reached through symlinks that lead outside the audited root
    (:func:`datacheck.formats.discovery.discover`).
    """
    if opts.fail_on not in FAIL_ON:
        raise UsageError(f"fail_on must be one of {FAIL_ON}, got {opts.fail_on!r}")
    cfg = with_tokenizer_facts(cfg)  # before the cache: the filled facts are part of the config hash
    spec = cfg.schema_spec()
    check_contract(cfg, opts.config_path)  # a bad schema is a usage error (exit 2) before any shard is read
    cache = ShardCache(opts.cache_dir, cfg, trust_mtime=opts.trust_mtime) if opts.cache_dir is not None else None
    if cache is not None and is_python_schema(spec):
        # the modules the schema's module imports are inputs no fingerprint covers: a cached result
        # could pass a gate a fresh audit fails
        warnings.warn(CacheWarning(f"the result cache is off for this audit: the Python schema {spec!r} may import "
                                   "other modules, whose changes the cache cannot see (every shard is read)"),
                      stacklevel=2)
        cache = None
    disc = discover([str(p) for p in paths], cfg.dataset.format, follow_symlinks=opts.follow_symlinks)
    cfg = with_declared_splits(cfg, disc, against=bool(opts.against))
    declared = with_declared_classes(cfg, disc)  # data_config takes the same steps
    if declared.labels != cfg.labels and cache is not None:  # the filled num_classes is part of the config hash
        cache = ShardCache(opts.cache_dir, declared, trust_mtime=opts.trust_mtime)
    cfg = declared
    index = index_path = None
    index_file = cfg.index_file()
    if index_file is not None:  # a bad index is a usage error before any shard is read
        index_path = resolve_index_path(index_file, disc.root)
        index = read_index(index_path, disc.root)
    return AuditSetup(cfg=cfg, disc=disc, cache=cache, index=index, index_path=index_path)


def data_config(paths: str | Path | Iterable[str | Path], config: Config | str | Path | dict | None = None, *,
                follow_symlinks: bool = False) -> Config:
    """The config an audit of ``paths`` runs under, with the facts it takes from the data, before any
    shard is read: ``config`` resolved as :func:`datacheck.audit` resolves it (None: found as the CLI
    finds it), then the facts of its ``[tokens] tokenizer``, the splits the data declares
    (:func:`with_declared_splits`) and the classes its Hugging Face features declare (``[labels]
    classes`` and ``tag_classes``: :func:`datacheck.derive.classlabel.with_declared_classes`), the steps
    :func:`prepare_audit` takes. Its :meth:`~datacheck.model.config.Config.hash` is the audit report's
    ``config_hash``. For the training loop: ``BatchGuard(collator, facts=datacheck.data_config("data/train"))``
    checks each batch against the same classes the audit does.

    Raises:
        UsageError: a path does not exist or holds no shard; ``config`` is of another type.
        ConfigError: the config is invalid, or ``[tokens] tokenizer`` does not load.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    cfg, _ = config_and_source(config, paths)
    cfg = with_tokenizer_facts(cfg)
    disc = discover([str(p) for p in paths], cfg.dataset.format, follow_symlinks=follow_symlinks)
    return with_declared_classes(with_declared_splits(cfg, disc), disc)
