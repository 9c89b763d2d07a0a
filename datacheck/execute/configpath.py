"""Which ``datacheck.toml`` an audit uses (:func:`resolve_config_path`): stdlib only, so the CLI can
answer a rerun from the whole-audit memo (:mod:`datacheck.execute.rerun`) without loading the config's
validator (pydantic) or polars."""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from datacheck.io.stores import is_url
from datacheck.model.constants import DEFAULT_CONFIG_NAME

__all__ = ["MAX_CONFIG_LEVELS", "VCS_MARKERS", "resolve_config_path", "data_folder"]


#: Most folders the lookup climbs from the data's folder (that folder and 7 parents above it): a
#: config applies to the data below it, never to a far-away tree; datacheck's own bound.
MAX_CONFIG_LEVELS = 8
#: A folder holding one of these is a repository root: the lookup checks it, then stops.
VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def data_folder(paths: Iterable[str | Path]) -> Path | None:
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
       :func:`data_folder`), then in each parent in turn, the first one found. The climb is bounded:
       at most :data:`MAX_CONFIG_LEVELS` folders; it stops after a repository root (a folder holding
       ``.git``, ``.hg``, ``.svn`` or ``.jj``: checked, not climbed out of); it never checks the user's
       home folder or anything above it (a ``~/datacheck.toml`` would apply to every dataset of the
       user), nor climbs past the file-system root;
    4. None: the defaults.

    A config found in step 2 or 3 is one datacheck found by itself: it may not run a Python schema
    (:func:`datacheck.execute.setup.config_and_source`). Relative paths inside it resolve against its own folder
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
    folder = data_folder(paths)
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
