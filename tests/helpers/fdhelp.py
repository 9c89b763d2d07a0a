"""Open file descriptors of the test's own process (Linux ``/proc/self/fd``): the tests that assert a
reader, a prefetch or a pooled parquet reader left no file open."""
from __future__ import annotations

import os
from pathlib import Path


def open_fds(path: Path) -> int:
    """Descriptors of this process open on ``path`` (its resolved path)."""
    target = str(path.resolve())
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == target
        except OSError:  # closed between the listing and the readlink
            pass
    return n
