"""The catalog IDs whose producer is not built yet (listed by `datacheck checks` as not built)."""
from __future__ import annotations

# Catalog IDs whose producer is not built yet: each leaves this set when its producer lands.
NOT_YET_BUILT: set[str] = set()
