"""The audit's set-up, shared by every entry point (``audit``, parts, ``inspect``, ``clean``,
``schema infer``): which config file applies, the validated config, and (:func:`prepare_audit`)
everything an audit checks before it reads any shard."""
from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from datacheck.contracts import load_contract
from datacheck.execute.cache import ShardCache
from datacheck.formats.discovery import discover
from datacheck.io.dataindex import DataIndex, read_index, resolve_index_path
from datacheck.io.discover import Discovery
from datacheck.io.stores import is_url
from datacheck.model.config import DEFAULT_CONFIG_NAME, Config, config_from_dict, load_config
from datacheck.model.constants import FAIL_ON
from datacheck.model.errors import UsageError

__all__ = ["MAX_CONFIG_LEVELS", "VCS_MARKERS", "resolve_config_path", "config_and_source", "AuditOptions",
           "FROM_CONFIG", "AuditSetup", "prepare_audit"]


#: Most folders the lookup climbs from the data's folder (that folder and 7 parents above it): a
#: config applies to the data below it, never to a far-away tree; datacheck's own bound.
MAX_CONFIG_LEVELS = 8
#: A folder holding one of these is a repository root: the lookup checks it, then stops.
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def _data_folder(paths: Iterable[str | Path]) -> Path | None:
    """The one folder holding every PATH (a folder PATH itself, a file's folder, a glob's folder before
    its first wildcard; several: their common folder, relative when all are relative), or None."""
    folders = []
    for arg in (str(p) for p in paths):
        if any(ch in arg for ch in "*?["):
            cut = min(arg.index(ch) for ch in "*?[" if ch in arg)
            base = arg[:cut]
            folders.append(Path(base) if base.endswith(("/", "\\")) or not base else Path(base).parent)
        else:
            p = Path(arg)
            folders.append(p if p.is_dir() else p.parent)
    if not folders:
        return None
    if len({str(f) for f in folders}) == 1:
        return folders[0]
    try:
        if all(not f.is_absolute() for f in folders):
            return Path(os.path.commonpath([os.path.normpath(f) for f in folders]) or ".")
        return Path(os.path.commonpath([os.path.abspath(f) for f in folders]))
    except ValueError:  # different drives
        return None


def resolve_config_path(given: str | Path | None, paths: Iterable[str | Path]) -> str | None:
    """The config file every entry point uses: ``audit`` (folder, file, glob), ``inspect``, ``clean``,
    ``index build/verify``, ``schema infer``, ``plan``, ``trace --data`` and the Python API with
    ``config=None`` all call this one function.

    Order:

    1. ``given`` (``--config``, or the API's ``config`` path);
    2. ``./datacheck.toml`` in the working folder;
    3. ``datacheck.toml`` in the data's folder (the one folder holding every PATH: see
       :func:`_data_folder`), then in each parent in turn, the first one found. The climb is bounded:
       at most :data:`MAX_CONFIG_LEVELS` folders; it stops after a repository root (a folder holding
       ``.git``, ``.hg``, ``.svn`` or ``.jj``: checked, not climbed out of); it never checks the user's
       home folder or anything above it (a ``~/datacheck.toml`` would apply to every dataset of the
       user), nor climbs past the file-system root;
    4. None: the defaults.

    A config found in step 2 or 3 is one datacheck found by itself: it may not run a Python schema
    (:func:`config_and_source`). Relative paths inside it resolve against its own folder
    (:meth:`datacheck.model.config.Config.anchored`). A URL PATH (an object store) is never searched
    for a config: it comes from ``--config`` or ``./datacheck.toml``.

    Args:
        given: the ``--config`` value, or None.
        paths: the PATH arguments as given (files, folders or globs).

    Returns:
        The path as given or joined from the PATH (relative stays relative), or None for defaults.
    """
    if given is not None:
        return str(given)
    if Path(DEFAULT_CONFIG_NAME).is_file():
        return DEFAULT_CONFIG_NAME
    paths = [str(p) for p in paths]
    if any(is_url(p) for p in paths):  # a config is never read from an object store
        return None
    folder = _data_folder(paths)
    if folder is None:
        return None
    home = Path(os.path.expanduser("~")).absolute()
    cand = folder
    for _ in range(MAX_CONFIG_LEVELS):
        real = cand.absolute().resolve()
        if real == home or real in home.parents and home != Path(home.anchor):
            break
        f = cand / DEFAULT_CONFIG_NAME
        if f.is_file():
            return str(f)
        if any((real / m).exists() for m in VCS_MARKERS) or real == real.parent:
            break
        cand = Path(os.path.normpath(cand / ".."))
    return None


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
            ``dataset_dict.json`` when the config names no split (see
            :func:`datacheck.io.discover.declared_splits`; the report's config and hash show them).
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


def prepare_audit(paths: Iterable[str | Path], cfg: Config, opts: AuditOptions) -> AuditSetup:
    """Every check an audit makes before reading shards, in one place: ``fail_on``, the data contract
    (``[dataset] schema``), the cache folder, discovery of the shards, the splits a ``DatasetDict``
    folder declares (used as ``[splits]`` when the config has none), and the committed data index.

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
    spec = cfg.schema_spec()
    if spec is not None:  # a bad schema is a usage error (exit 2) before any shard is read
        load_contract(spec)
    cache = ShardCache(opts.cache_dir, cfg, trust_mtime=opts.trust_mtime) if opts.cache_dir is not None else None
    disc = discover([str(p) for p in paths], cfg.dataset.format, follow_symlinks=opts.follow_symlinks)
    if not cfg.splits:  # a DatasetDict folder's declared splits, as [splits] entries; an explicit [splits] wins
        declared = disc.declared_splits()
        if declared:
            cfg = cfg.model_copy(update={"splits": declared})
    index = index_path = None
    index_file = cfg.index_file()
    if index_file is not None:  # a bad index is a usage error before any shard is read
        index_path = resolve_index_path(index_file, disc.root)
        index = read_index(index_path, disc.root)
    return AuditSetup(cfg=cfg, disc=disc, cache=cache, index=index, index_path=index_path)
