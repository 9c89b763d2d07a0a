"""Named constants shared by the CLI and the library: exit codes, report version, limits."""
from __future__ import annotations

import re

__all__ = [
    "PYTHON_SCHEMA",
    "is_python_schema",
    "EXIT_OK",
    "EXIT_POLICY_FAILED",
    "EXIT_USAGE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "REPORT_VERSION",
    "HASH_ALGORITHM",
    "DEFAULT_REPORT_DIR",
    "DEFAULT_CONFIG_NAME",
    "ENV_WORKERS",
    "EXECUTORS",
    "DEFAULT_MAX_EXAMPLES",
    "EXAMPLE_VALUE_MAX_CHARS",
    "FP16_MAX",
    "BF16_MAX",
    "FP32_MAX",
]

#: Exit codes of the ``datacheck`` CLI (DESIGN.md, "CLI contract").
EXIT_OK = 0
EXIT_POLICY_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
#: Ended by a signal: 128 + the signal's number, the shell's convention (SIGINT = 2: Ctrl-C; SIGTERM = 15:
#: ``kill PID``, a scheduler's preemption). Temporary files are removed first; no output is half-written.
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

#: Version of the JSON report layout; a reader refuses a newer one.
REPORT_VERSION = 1
#: Algorithm of every content hash datacheck stores (prefix of ``content_hash`` values).
HASH_ALGORITHM = "xxh3-128"
DEFAULT_REPORT_DIR = ".datacheck/reports"
#: The config file name datacheck looks for (``--config`` names another).
DEFAULT_CONFIG_NAME = "datacheck.toml"
#: Example rows kept per finding (``rows``/``examples``), unless ``[report] max_examples`` says otherwise.
DEFAULT_MAX_EXAMPLES = 20
#: Example values are shown truncated to this many characters.
EXAMPLE_VALUE_MAX_CHARS = 160

#: Largest finite IEEE 754 binary16 value (fp16): (2 - 2**-10) * 2**15.
FP16_MAX = 65504.0
#: Largest finite bfloat16 value: (2 - 2**-7) * 2**127 ~= 3.3895e38.
BF16_MAX = 3.3895313892515355e38
#: Largest finite IEEE 754 binary32 value (fp32): (2 - 2**-23) * 2**127.
FP32_MAX = 3.4028234663852886e38


FAIL_ON = ("error", "warn", "never")

#: Target decoded size of one batch of a shard (the columns the checks read): a shard whose needed
#: columns decode to more is audited batch by batch (parquet record batches, slices of other
#: sources), each batch's results merged exactly (``datacheck.engine.shard``). 64 MiB keeps the peak
#: (batch + exploded position views + expression temporaries) well under 1.5 GB on token shards.
BATCH_TARGET_BYTES = 64 * 2**20
#: Environment variable forcing the rows of one batch (an int >= 1; tests use tiny batches to prove
#: that every result merges exactly). Unset: rows from :data:`BATCH_TARGET_BYTES`.
ENV_BATCH_ROWS = "DATACHECK_BATCH_ROWS"
#: a shard whose needed columns decode to at most this many times
#: :data:`BATCH_TARGET_BYTES` is read as one batch (:func:`datacheck.formats.batches.batch_rows`).
#: A shard read in batches holds two at once (the one being checked and the next, decoded ahead in a
#: thread), so reading one of up to two targets whole peaks about as high: a 7,800 x 1024-token
#: shard (104 MB decoded) peaked at 610 MiB RSS whole against 592 MiB in batches, and took 27 % less
#: CPU (382 vs 525 ms, in one process, interleaved, one polars thread): no second decode of its first
#: rows (the layout's sample is the one read's head, the ramp's first batch needs no second reader)
#: and one fused query instead of four (the ramp's short first and final batches and the remainder)
ONE_BATCH_TARGETS = 2
#: default ``[dataset] max_row_bytes``: 128 MiB a row, the most the engine decodes in one read
#: (:data:`ONE_BATCH_TARGETS` x :data:`BATCH_TARGET_BYTES`). A row of more cannot be checked in the
#: engine's bounded batches (a batch is at least one row, and pyarrow's decode of it peaks at about 4
#: copies of its bytes: 2.12 GB in pyarrow's pool for one 500 MiB string): a parquet row group whose
#: rows average more, from its footer, is refused before any decode
#: (:func:`datacheck.formats.parquetdecode.wide_row_group`)
MAX_ROW_BYTES = ONE_BATCH_TARGETS * BATCH_TARGET_BYTES
#: the most decoded bytes one batch of a streamed reader holds (JSONL, CSV/TSV, plain text): its rows
#: are counted (``BATCH_TARGET_BYTES`` over the file's average row) and its bytes counted, whichever
#: comes first (:func:`datacheck.formats.stream_source.recut`), so that rows far bigger than the
#: average (1,100 rows of 50 bytes, then 100 of 4 MB: one batch of the 400 MB before, 1.69 GB peak RSS)
#: never make a batch of more than one read's worth (:data:`MAX_ROW_BYTES`); a row of more is a batch
#: of its own. Uniform rows never reach it (a batch of the average holds half of it)
BATCH_MAX_BYTES = MAX_ROW_BYTES
#: bytes the layout recognizer's sample of a shard's first rows holds at most (its 1,000 rows,
#: ``datacheck.derive.layout.SAMPLE_ROWS``, fewer where the reader's size of a row says those hold more:
#: ``datacheck.engine.shard._Sampler``): one batch target, the most the engine holds of a shard's rows
#: at once anyway, so the sample adds no peak of its own. Unbounded, 1,000 rows of up to [dataset]
#: max_row_bytes each (128 MiB) could take 125 GiB before any check ran
LAYOUT_SAMPLE_BYTES = BATCH_TARGET_BYTES

#: with ``ramp``, the first parquet batch holds 1/8 of a batch (decoded on its own,
#: :func:`datacheck.formats.parquetdecode.decoded`), and so does the final one: the pipeline's fill (the
#: engine waits for the first decode) drops from a whole batch's decode (about 0.13 s of 0.33 s on
#: the 100,000 x 128 shard of benchmarks/bench_audit.py, 3 batches) to 1/8 of it, for one more
#: batch (about 20 ms CPU of fixed per-batch cost in the fused query)
RAMP_DIVISOR = 8
#: Environment variable giving the default number of workers (``--workers`` and ``workers=`` win).
ENV_WORKERS = "DATACHECK_WORKERS"
#: The executor names ``--executor`` accepts.
EXECUTORS = ("local", "process", "ray")


#: ``[dataset] schema = "file.py:ClassName"``: a Pandera model in a Python file (loading it imports, i.e.
#: executes, that file)
PYTHON_SCHEMA = re.compile(r"^(.+\.py):([A-Za-z_]\w*)$")


def is_python_schema(spec: str | None) -> bool:
    """Whether ``[dataset] schema`` names a Python module's model (``file.py:ClassName``): its module
    may import others, which no file fingerprint covers, so the result caches do not serve it."""
    return bool(spec) and PYTHON_SCHEMA.match(spec or "") is not None
