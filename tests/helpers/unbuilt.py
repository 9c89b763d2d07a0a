"""The catalog IDs whose producer is not built yet (listed by `datacheck checks` as not built)."""
from __future__ import annotations

# Catalog IDs whose producer (trace's dynamics and metric rules, `datacheck checkpoint`,
# `datacheck order verify`) is not built yet: each leaves this set when its producer lands.
NOT_YET_BUILT = {
    "log.divergence", "log.stagnation", "log.zero_lr", "log.overfit_onset", "log.vanishing_grad",
    "log.periodic_spikes", "log.post_warmup_spike", "log.no_loss", "log.hidden_non_finite",
    "log.smoothed_loss", "log.duplicate_steps", "log.lr_per_micro_batch",
}
