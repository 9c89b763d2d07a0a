"""Every check family, imported so that its checks register (:mod:`datacheck.checks.registry`).

The engine and every verb that runs checks import this module; a new family module is one import
line here. Nothing in the registry imports the families (they import the registry), so there is no
cycle.
"""
from __future__ import annotations

from datacheck.checks import (  # noqa: F401 - imported for their registrations
    batch,
    content,
    crossdup,
    decode,
    dist,
    dup,
    empty,
    finite,
    index,
    labels,
    length,
    mask,
    neardup,
    packing,
    padding,
    pref,
    roledtype,
    schema,
    sft,
    tokens,
)

__all__: list[str] = []
