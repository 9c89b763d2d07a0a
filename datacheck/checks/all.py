"""Every check family, imported so that its checks register (:mod:`datacheck.checks.registry`).

The engine and every verb that runs checks import this module; a new family module is one import
line here (a family package, e.g. :mod:`datacheck.checks.dup`, names each of its modules). Nothing
in the registry imports the families (they import the registry), so there is no cycle.
"""
from __future__ import annotations

from datacheck.checks import (  # noqa: F401 - imported for their registrations
    batch,
    content,
    decode,
    dist,
    empty,
    finite,
    index,
    labels,
    length,
    mask,
    packing,
    padding,
    pref,
    roledtype,
    schema,
    sft,
    tokens,
)
from datacheck.checks.dup import cross, in_shard, near, shard  # noqa: F401 - imported for their registrations

__all__: list[str] = []
