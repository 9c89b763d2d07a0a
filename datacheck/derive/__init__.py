"""The step between opening a shard and checking it: the read path (:mod:`datacheck.derive.read`:
the format's reader, casts, roles) and the columns it derives for the checks: the Alpaca layout's
conversation (:mod:`datacheck.derive.alpaca`), conversations rendered by the chat template
(:mod:`datacheck.derive.chat`), preference pairs rendered as TRL renders them
(:mod:`datacheck.derive.pairs`); conversations normalized as polars expressions
(:mod:`datacheck.derive.messages`). Derive names no check ID: what it cannot derive it returns as
typed values that the check families report.
"""
