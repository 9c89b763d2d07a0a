"""The catalog of check IDs (a public contract, mirrored from CHECKS.md).

Each entry gives the check's family, level (``row``, ``shard`` or ``dataset``), default severity
and a one-line description. Reports, policies and users' scripts key on these IDs; an ID never
changes meaning.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["CheckInfo", "CATALOG", "info", "is_known", "unknown_hint"]


@dataclass(frozen=True)
class CheckInfo:
    id: str
    level: str  # "row" | "shard" | "dataset"; trace: "step" | "run"; checkpoint: "checkpoint"
    severity: str  # default: "error" | "warn" | "info"
    summary: str

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


_ENTRIES = [
    ("decode.unreadable", "shard", "error", "the shard cannot be opened or parsed"),
    ("decode.bad_record", "row", "error", "a JSONL/CSV record does not parse"),
    ("decode.invalid_utf8", "row", "error", "a text field or line is not valid UTF-8"),
    ("schema.missing_column", "shard", "error", "a column the schema or the roles need is absent"),
    ("schema.dtype", "shard", "error", "a column's type differs from the schema"),
    ("schema.nullable", "row", "error", "nulls in a column declared non-nullable"),
    ("schema.check", "row", "error", "a user-defined Pandera check fails"),
    ("schema.inconsistent", "dataset", "error", "shards disagree on columns or types"),
    ("finite.nan", "row", "error", "NaN in a float value or inside a list of floats"),
    ("finite.inf", "row", "error", "+inf or -inf in a float value or list of floats"),
    ("finite.fp16_overflow", "row", "error", "a finite value overflows the compute dtype"),
    ("empty.text", "row", "error", "a text value is null, empty or whitespace-only"),
    ("empty.sequence", "row", "error", "input_ids has length 0"),
    ("empty.all_padding", "row", "error", "the sample is only padding"),
    ("empty.no_supervised_tokens", "row", "error", "every token label is ignore_index after truncation (masked_lm: in every row of the shard)"),
    ("labels.out_of_range", "row", "error", "a label outside the class range or vocabulary"),
    ("labels.unexpected_sentinel", "row", "error", "a negative label that is not ignore_index"),
    ("labels.null", "row", "error", "a missing label"),
    ("labels.unseen_class", "dataset", "warn", "a class that never occurs in the dataset"),
    ("tokens.out_of_vocab", "row", "error", "an input id outside [0, vocab_size)"),
    ("tokens.dtype_overflow", "shard", "error", "the id column's storage type cannot hold vocab_size - 1"),
    ("tokens.type_id_out_of_range", "row", "error", "a token_type_ids value outside [0, type_vocab_size)"),
    ("length.over_max", "row", "warn", "a sequence is longer than max_seq_len"),
    ("length.mismatch", "row", "error", "list columns that must align differ in length"),
    ("mask.non_binary", "row", "error", "an attention_mask value is not 0 or 1"),
    ("mask.not_contiguous", "row", "error", "the attention_mask is not one block of 1s"),
    ("padding.token_not_pad", "row", "warn", "a masked-out position holds an id other than pad_token_id"),
    ("padding.label_not_ignored", "row", "error", "a masked-out position has a label other than ignore_index"),
    ("padding.eos_unsupervised", "dataset", "error", "pad == eos and the eos is never supervised"),
    ("padding.pad_attended", "row", "error", "pad != eos and a position holding pad_token_id has mask 1"),
    ("sft.role_order", "row", "error", "a conversation a chat template rejects or mis-renders"),
    ("sft.empty_turn", "row", "error", "a message whose content is null, empty or whitespace-only"),
    ("sft.no_assistant_turn", "row", "error", "a conversation with no assistant message"),
    ("sft.assistant_mask_empty", "row", "error", "assistant_mask is all 0 in a row"),
    ("sft.prompt_supervised", "row", "error", "a position outside the assistant spans carries a supervised label"),
    ("sft.eot_unsupervised", "row", "warn", "the end-of-turn token closing an assistant turn is not supervised"),
    ("sft.truncated_response", "row", "warn", "a max_seq_len row whose last supervised token is not end-of-turn/eos"),
    ("sft.double_bos", "row", "warn", "the sequence starts with bos_token_id twice"),
    ("packing.position_ids_not_reset", "row", "error", "a packed document does not start at 0 or step by 1"),
    ("packing.boundary_mismatch", "row", "error", "seq_lens/cu_seqlens/document_ids disagree with the row"),
    ("packing.cross_document_label", "row", "error", "the target across a document boundary is supervised"),
    ("pref.identical_pair", "row", "error", "chosen equals rejected (after truncation)"),
    ("pref.empty_response", "row", "error", "chosen or rejected is null, empty or whitespace-only"),
    ("content.periodic_tokens", "row", "warn", "a period of 1 to 13 tokens repeats at least 32 times"),
    ("tokens.position_out_of_range", "row", "error", "a position id outside [0, max_position_embeddings)"),
    ("labels.shift_mismatch", "row", "error", "labels are shifted the other way than labels.shifted says"),
    ("labels.binary_out_of_range", "row", "error", "a binary target outside [0, 1] (a NaN is finite.nan's)"),
    ("dist.target_scale", "shard", "warn", "a regression target's std or |mean| exceeds target_scale_warn"),
    ("length.ctc_infeasible", "row", "error", "input frames cannot emit the CTC label sequence"),
    ("dup.exact_in_shard", "row", "warn", "a row repeats an earlier row of the same shard"),
    ("dup.exact_across_shards", "dataset", "warn", "a row repeats a row of another shard"),
    ("dup.conflicting_labels", "dataset", "warn", "the same content occurs with different labels"),
    ("dup.shard", "dataset", "error", "two shards have identical content hashes"),
    ("dup.split_overlap", "dataset", "error", "rows of one split also occur in another"),
    ("dup.near_duplicate", "dataset", "warn", "rows whose text or token ids are near-identical (MinHash LSH)"),
    ("index.missing_shard", "dataset", "error", "a shard listed in the index is absent"),
    ("index.extra_shard", "dataset", "warn", "a shard on disk is not in the index (or in no split of the dataset "
     "card's configs or the Hub's file names, which load_dataset skips)"),
    ("index.changed_shard", "dataset", "error", "a shard's content hash differs from the index"),
    ("index.row_count_mismatch", "shard", "error", "a shard's row count differs from the index or its metadata"),
    ("index.numbering_gap", "dataset", "error", "NAME-0000k-of-0000N shard names have gaps"),
    ("index.empty_shard", "shard", "warn", "a readable shard with 0 rows"),
    ("index.temp_file", "dataset", "warn", "a partial or temporary file among the shards"),
    ("dist.length_drift", "shard", "warn", "a shard's length histogram differs from the rest"),
    ("dist.label_drift", "shard", "warn", "a shard's label distribution differs from the rest"),
    ("batch.small_tail", "dataset", "warn", "the last batch per rank is under half of batch_size"),
    ("batch.singleton_tail", "dataset", "error", "the last batch has exactly 1 sample"),
    ("batch.no_batches", "dataset", "error", "fewer samples than one batch with drop_last"),
    ("batch.wraparound", "dataset", "info", "a distributed sampler pads by repeating samples"),
    ("batch.no_supervised_tokens", "dataset", "error", "a micro-batch has 0 supervised tokens"),
    ("log.non_finite", "step", "error", "a loss or grad norm is NaN or inf; the first such step per rank"),
    ("log.loss_spike", "step", "warn", "the loss exceeds the spike rule (megatron, foundry, olmo or user)"),
    ("log.grad_norm_spike", "step", "warn", "the gradient norm exceeds the spike rule"),
    ("log.loss_scale_collapse", "step", "error", "the fp16 loss scale backs off several times in a row or reaches its minimum"),
    ("log.skipped_steps", "run", "warn", "optimizer steps were skipped: count and first step"),
    ("log.step_regression", "step", "info", "step numbers go back, or a new launch begins in the log without them going back (a resume from an earlier checkpoint)"),
    ("log.lr_discontinuity", "step", "warn", "the learning rate jumps at a resume point or warmup restarts"),
    ("log.rank_divergence", "step", "warn", "one rank goes non-finite or diverges while others do not, or ranks are unseen"),
    ("log.divergence", "step", "warn", "after warmup the smoothed loss stays above its best value by a margin for a window"),
    ("log.stagnation", "run", "warn", "after warmup the smoothed loss improves by under 1% over a window of >= 20% of the run"),
    ("log.zero_lr", "step", "error", "the learning rate is 0 on every logged step, or from some step before the end"),
    ("log.overfit_onset", "step", "warn", "the eval loss rises past its minimum over >= 3 evals while the train loss falls"),
    ("log.vanishing_grad", "step", "warn", "the grad norm decays below 1e-3 of its early median while the loss is flat"),
    ("log.periodic_spikes", "run", "warn", "loss or grad-norm spikes recur at a period (epoch, tail batch, shard switch)"),
    ("log.post_warmup_spike", "step", "warn", "a spike within a few steps after the learning rate reaches its peak"),
    ("log.no_loss", "run", "error", "no record carries a loss: nothing was measured"),
    ("log.hidden_non_finite", "step", "error", "a non-finite loss the logger hid (logging_nan_inf_filter, frac_non_finite_loss)"),
    ("log.smoothed_loss", "run", "info", "the logged loss is a running average, not a per-step value"),
    ("log.duplicate_steps", "step", "warn", "a step logged twice with different values, or an eval at a step no train record reached"),
    ("log.lr_per_micro_batch", "run", "warn", "the learning rate advances per micro-batch, or does not match the configured schedule"),
    ("ckpt.missing_optimizer", "checkpoint", "error", "no optimizer state or no moment buffers: a warm start, not a lossless resume"),
    ("ckpt.missing_scheduler", "checkpoint", "error", "no learning-rate scheduler state: the warmup reruns and the lr jumps"),
    ("ckpt.missing_scaler", "checkpoint", "warn", "fp16 with a loss scaler and no scaler state: the scale restarts"),
    ("ckpt.missing_rng", "checkpoint", "warn", "no RNG state for some rank: dropout and sampling differ after the resume"),
    ("ckpt.missing_sampler_state", "checkpoint", "error", "no sampler or dataloader position the trainer could restore"),
    ("ckpt.step_mismatch", "checkpoint", "error", "the folder's step, global_step, the scheduler's and the optimizer's steps disagree"),
    ("ckpt.rank_missing", "checkpoint", "error", "a per-rank file (RNG, optimizer or model shard) is absent for some rank"),
    ("ckpt.unsafe_pickle", "checkpoint", "warn", "a pickle needs a global beyond tensors and plain containers; never loaded"),
    ("order.seen_twice", "dataset", "error", "rows trained on more than once within one epoch"),
    ("order.never_seen", "dataset", "error", "rows of a completed epoch never trained on"),
    ("order.divergent_step", "step", "warn", "the first optimizer step whose rows leave the plan"),
    ("order.rank_skew", "step", "error", "ranks at different loader positions after a resume"),
]

CATALOG: dict[str, CheckInfo] = {e[0]: CheckInfo(*e) for e in _ENTRIES}


def info(check_id: str) -> CheckInfo:
    """Return the catalog entry of ``check_id``. Raises KeyError for an unknown ID."""
    return CATALOG[check_id]


def is_known(check_id: str) -> bool:
    return check_id in CATALOG


def unknown_hint(check_id: str) -> str:
    """The hint after "unknown check ID": `` (did you mean 'ID'?)`` naming a catalog ID with the same
    last part (``tokens.out_of_vocab`` for ``token.out_of_vocab``), else the closest by spelling
    (difflib ratio >= 0.6, its own default), else where the IDs are listed. The config's ``[policy]``,
    ``inspect --check`` and ``clean --drop`` all give it."""
    close = ([c for c in CATALOG if c.split(".")[-1] == check_id.split(".")[-1]]
             or difflib.get_close_matches(check_id, list(CATALOG), n=1))
    return f" (did you mean {close[0]!r}?)" if close else " (`datacheck checks` lists the IDs)"
