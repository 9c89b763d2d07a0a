"""Bytes in and out: shard discovery (:mod:`~datacheck.io.discover`), hashes, object stores, the recorded
ledger and every write (:mod:`~datacheck.io.outputs`). Names no check ID; the format readers live in
``datacheck.formats``, the read path in :mod:`datacheck.derive.read`."""
