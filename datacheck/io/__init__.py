"""Bytes in and out: shard discovery (:mod:`~datacheck.io.discover`), the one read path
(:mod:`~datacheck.io.read`), hashes, object stores and every write (:mod:`~datacheck.io.outputs`)."""
