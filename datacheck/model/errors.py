"""datacheck's own failures. Data problems are never exceptions: they are findings.

Hierarchy::

    DatacheckError
    ├── UsageError          bad flag or argument (CLI exit 2)
    │   └── ConfigError     bad datacheck.toml key or value (exit 2)
    ├── ReportVersionError  a report written by a newer datacheck (exit 2)
    ├── PolicyFailed        raised by Report.raise_for_policy() when the gate fails (exit 1)
    └── InternalError       a bug in datacheck (exit 3)

Every message says the bad value, what was expected and what to do.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "DatacheckError",
    "UsageError",
    "ConfigError",
    "ReportVersionError",
    "PolicyFailed",
    "InternalError",
    "OutOfMemory",
    "ran_out_of_memory",
    "OptionalDependencyError",
    "BatchValidationError",
    "ENGINE_ERRORS",
]


class DatacheckError(Exception):
    """Base class of every exception datacheck raises on purpose."""


class UsageError(DatacheckError):
    """A command-line argument or API argument is wrong (exit code 2)."""


class ConfigError(UsageError):
    """The configuration is invalid. ``key`` names the offending key, e.g. ``tokens.vocab_size``."""

    def __init__(self, message: str, key: str | None = None, path: str | None = None):
        self.key = key
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


class ReportVersionError(DatacheckError):
    """A report file has a ``report_version`` this datacheck cannot read."""


class PolicyFailed(DatacheckError):
    """The audit's findings fail the gate policy. ``report`` holds the full report."""

    def __init__(self, message: str, report: object | None = None):
        self.report = report
        super().__init__(message)


class InternalError(DatacheckError):
    """A bug in datacheck: please report it with the command line and the traceback."""


class OutOfMemory(DatacheckError):
    """The machine ran out of memory while datacheck worked (a ``MemoryError``, pyarrow's
    ``ArrowMemoryError`` among them): not a defect of the data nor a bug; the message names the
    shard and what to do (fewer workers, smaller batches). The CLI's exit code is 3, as for a worker
    process killed for memory."""

    @classmethod
    def decoding(cls, shard: str, size: int = 0) -> "OutOfMemory":
        """Memory ran out while ``shard`` (``size`` bytes, 0: not known) was decoded or checked."""
        what = f"{shard} ({size:,} bytes)" if size else shard
        return cls(f"memory ran out while decoding {what}; the data itself may be fine: run again with fewer "
                   "--workers (each worker holds a batch of its shard in memory), smaller batches "
                   "(DATACHECK_BATCH_ROWS=N rows a batch), or on a machine with more memory")

    @classmethod
    def check(cls, exc: BaseException, shard: str, size: int = 0) -> None:
        """Raise :meth:`decoding` of ``shard`` when ``exc`` (e.g. an unreadable shard) came from memory
        running out (:func:`ran_out_of_memory`); else return, the caller handling ``exc`` as it does."""
        if ran_out_of_memory(exc):
            raise cls.decoding(shard, size) from None


def ran_out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a ``MemoryError``, or was raised while one was handled (its
    ``__cause__``/``__context__`` chain holds one: a reader that turned it into an unreadable
    shard with ``raise ... from None`` keeps it as the context)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MemoryError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class OptionalDependencyError(UsageError):
    """An optional package is needed for the requested feature; the message gives the install command."""


class BatchValidationError(DatacheckError):
    """A collated batch failed :class:`datacheck.torch.BatchGuard`'s checks (raised in the training loop).

    Attributes:
        batch: the batch's 0-based position: in the epoch's sampler order under ``record_batches`` (the
            message names its step and micro-batch), else in the loader's order (see ``datacheck.torch.guard``).
        failures: check ID -> 0-based rows of the batch that fail it (``[]`` for a batch-level failure).
        dump: the file the batch was saved to (``torch.load(path, weights_only=True)``), or None.
    """

    def __init__(self, message: str, batch: int = 0, failures: dict[str, list[int]] | None = None,
                 dump: str | None = None):
        super().__init__(message)
        self.batch = batch
        self.failures = dict(failures or {})
        self.dump = dump




#: (declared for readers and type checkers; the value is built by :func:`__getattr__` on first use)
ENGINE_ERRORS: tuple[type[BaseException], ...]


def __getattr__(name: str) -> Any:
    """``ENGINE_ERRORS``: what a failing polars query raises: its exceptions, and ``PanicException`` (a
    ``BaseException`` raised when the engine itself panics, e.g. on some fused list expressions over a
    parquet scan). Both are isolated to the check at fault, never allowed to crash the audit.

    Built on first access (PEP 562), so that importing the error classes does not import polars
    (the CLI's start-up, a rerun answered from the whole-audit memo: :mod:`datacheck.execute.rerun`).

    Raises:
        AttributeError: any other missing name.
    """
    if name == "ENGINE_ERRORS":
        import polars as pl  # lazy: 0.2-0.4 s, needed only where a query runs

        value: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
