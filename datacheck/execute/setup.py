"""The audit's set-up, shared by every entry point (``audit``, parts, ``inspect``, ``clean``,
``schema infer``): which config file applies, and the validated config."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from datacheck.model.config import DEFAULT_CONFIG_NAME, Config, config_from_dict, load_config

__all__ = ["resolve_config_path", "config_and_source"]


def resolve_config_path(given: str | Path | None, paths: Iterable[str | Path]) -> str | None:
    """The config file every entry point uses (CLI commands and :func:`audit` with ``config=None``).

    Order: ``given`` (``--config``); else ``./datacheck.toml`` in the working folder; else, when all
    ``paths`` lie in one folder (one folder PATH, or files of one folder), ``datacheck.toml`` in that
    folder, then in its parent (a case folder with ``data/`` inside: the config travels with the
    data); else None (the defaults). Globs count by the folder before their first wildcard.

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
    folders = set()
    for arg in (str(p) for p in paths):
        if any(ch in arg for ch in "*?["):
            cut = min(arg.index(ch) for ch in "*?[" if ch in arg)
            base = arg[:cut]
            folders.add(Path(base) if base.endswith(("/", "\\")) or not base else Path(base).parent)
        else:
            p = Path(arg)
            folders.add(p if p.is_dir() else p.parent)
    if len(folders) != 1:
        return None
    (folder,) = folders
    for cand in (folder, folder.parent):
        f = cand / DEFAULT_CONFIG_NAME
        if f.is_file():
            return str(f)
        if cand == cand.parent:
            break
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
    # A config the caller named may run its Python schema; one found next to the data may not (issue 15 item 9).
    trusted = config is not None or allow_python_schema
    return (load_config(source, allow_python_schema=trusted) if source is not None else Config()), source
