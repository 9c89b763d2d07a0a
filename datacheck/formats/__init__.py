"""SHARD FORMATS: one module per format, one reader per format (see :mod:`datacheck.formats.base`).

- :mod:`.parquet`; :mod:`.arrow` (Arrow IPC file and stream, Hugging Face ``save_to_disk``);
  :mod:`.jsonl` (JSON Lines, also ``.gz``/``.zst``, and JSON-array files); :mod:`.csv` (CSV/TSV and
  other separators): streamed readers (a shard's rows are batches read straight from the file);
- :mod:`.megatron` (``.bin``/``.idx``), :mod:`.mds` (MosaicML), :mod:`.webdataset` (tar),
  :mod:`.litdata` (chunks): in-memory readers of byte layouts, each module states its rules;
- :mod:`.parquetdecode`: parquet's pyarrow side without polars (footer sizes, decoded record batches,
  the prefetch of a shard's first batches the CLI starts while it imports);
- the shared pieces: :mod:`.base` (the protocol, ``ShardData``, ``ShardReader``), :mod:`.registry`
  (the formats, ``open_shard``, ``rewriter``), :mod:`.records` (the JSONL/CSV record splitter, also
  used by the rewrites), :mod:`.rewrite` (``clean``'s rewrites: JSONL/CSV records, parquet/Arrow tables),
  :mod:`.jsonvalues` (JSON records as frames), :mod:`.findings` (the line formats' ``decode.*``
  findings), :mod:`.arrowtypes` (Arrow data polars can take), :mod:`.stream_source` (an IO-plugin
  LazyFrame over a reader's batches, re-cutting), :mod:`.batches` (a shard as the engine's batches,
  from the opened shard's reader or slices of its frame).

The layer: ``formats`` imports :mod:`datacheck.model` and :mod:`datacheck.io` (bytes, stores) only.
"""
