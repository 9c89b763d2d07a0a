"""dup: repeated rows and shards (every ``dup.*`` ID), one module per scope:

- :mod:`datacheck.checks.dup.in_shard`: ``dup.exact_in_shard``, rows repeated inside one shard;
- :mod:`datacheck.checks.dup.cross`: ``dup.exact_across_shards``, ``dup.conflicting_labels`` and
  ``dup.split_overlap``, from the 128-bit row hashes the shards' queries computed (the merge);
- :mod:`datacheck.checks.dup.near`: ``dup.near_duplicate`` (MinHash LSH);
- :mod:`datacheck.checks.dup.shard`: ``dup.shard``, shards with identical bytes.

:mod:`datacheck.checks.all` imports each module, so that its checks register.
"""
