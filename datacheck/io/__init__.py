"""BYTES IN AND OUT: shard discovery (the formats' rules passed in), object stores, hashing, outputs,
the recorded ledger, the JSON loader, metadata files. Names no check ID. The shard formats, their readers and
their discovery rules are :mod:`datacheck.formats`; the read path is :mod:`datacheck.derive.read`."""
