"""``BatchGuard``: check each collated batch in the training loop, with the check IDs of CHECKS.md.

Wraps a collate function. After collation the batch (a mapping of tensors, e.g. Hugging Face's
``input_ids`` / ``attention_mask`` / ``labels``; column names from ``[columns]`` when set) is checked:

- ``finite.nan`` / ``finite.inf``: a NaN / +-inf in any floating tensor (per row: first dim = batch);
- ``finite.fp16_overflow``: with ``[numeric] compute_dtype = "fp16"`` a finite |value| > 65504 (the
  largest binary16 number, IEEE 754), with ``"bf16"`` above 3.3895e38;
- ``tokens.out_of_vocab``: an ``input_ids`` value outside ``[0, vocab_size)``;
- ``labels.out_of_range``: a label outside ``[0, vocab_size)`` (token labels, 2-D; with ``[dataset]
  layout`` or ``schema`` = ``"token_classification"``, or facts whose ``classes`` are the names the
  data's token tags declare, NER/POS tags: ``[0, num_classes)`` or ``[0, len(classes))``) or ``[0, num_classes)`` (class
  labels, 1-D; ``[0, len(classes))`` when ``classes`` are names, as a ``ClassLabel`` indexes them; one
  of ``classes`` when they are values) that is not ``ignore_index``; a tensor named as a token tag
  column of ``[labels] tag_classes`` (CoNLL's ``pos_tags``, ``chunk_tags``) outside ``[0, len(names))``;
- ``labels.unexpected_sentinel``: a negative label that is not ``ignore_index`` (reported only here);
- ``mask.non_binary``: an ``attention_mask`` value other than 0 or 1; ``empty.all_padding``: a mask
  row of all zeros;
- ``empty.no_supervised_tokens``: a row whose token labels are all ``ignore_index``;
  ``batch.no_supervised_tokens``: the whole micro-batch has none (mean loss 0/0 = NaN);
- ``length.mismatch``: ``input_ids``, ``attention_mask`` and ``labels`` differ in shape.

Facts that are unset (no ``vocab_size``, nor a ``[tokens] tokenizer`` that gives it) leave their check
out, as the audit does; the tokenizer's facts fill what ``[tokens]`` leaves unset. The classes the
data's Hugging Face features declare come with ``facts=datacheck.data_config("data/train")`` (the
config the audit of that data runs under: ``[labels] classes`` and ``tag_classes`` filled from its
``ClassLabel`` / ``Sequence(ClassLabel)`` declarations). Every check is
a vectorized tensor reduction; the results are combined so the batch costs one host sync.

A failing batch is named by its place in the sampler's order, never by a count local to one process:

- under :func:`~datacheck.torch.record.record_batches` (also inside DataLoader workers): the step and
  micro-batch the ledger records for it (:class:`~datacheck.torch.position.BatchTag`);
- otherwise its position among the loader's batches of the epoch: the DataLoader hands batch ``k`` of
  an iteration to worker ``k mod num_workers`` (map-style datasets, in-order loading), so a worker's
  ``j``-th batch of the iteration is ``j x num_workers + worker``; with ``num_workers == 0`` the guard's
  own count. (With ``persistent_workers`` the epoch boundary is not visible to a worker; record the
  order with ``record_batches`` to name steps.)

On failure the batch is saved (when ``dump_dir`` is given) as
``batch-r<rank>-s<step>-m<micro>-e<epoch>.pt`` (recorded) or ``batch-r<rank>-w<worker>-<position>.pt``,
written atomically (a temporary file renamed into place), with a ``-<k>`` suffix when the name is
taken (a later epoch's batch at the same position), holding only tensors and plain values
(``torch.load(path, weights_only=True)`` reads it), then ``on_error`` decides: ``"raise"``
:class:`~datacheck.model.errors.BatchValidationError` naming the batch, the checks and the rows;
``"warn"`` a ``RuntimeWarning`` and the batch unchanged; ``"skip"`` the batch without its offending rows
(None when no row is left or the failure is batch-wide). Every failure of this process is also kept
in :attr:`BatchGuard.failures` (the Hugging Face callback reads it; a worker's failures reach the main
process through ``dump_dir``).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from datacheck.derive.tokenizer import with_tokenizer_facts
from datacheck.io.outputs import write_atomic
from datacheck.model.config import Config, config_from_dict, load_config
from datacheck.model.errors import BatchValidationError, UsageError
from datacheck.model.layouts import layout_of
from datacheck.model.torchdep import require_torch
from datacheck.torch.position import BatchTag, take_tag

__all__ = ["BatchGuard", "FP16_MAX", "BF16_MAX"]

#: largest finite IEEE 754 binary16 value
FP16_MAX = 65504.0
#: largest finite bfloat16 value ((2 - 2**-7) * 2**127)
BF16_MAX = 3.3895313892515355e38


def _facts(facts: Config | Mapping[str, Any] | str | Path | None) -> Config:
    """The guard's facts as a :class:`Config`, with those of its ``[tokens] tokenizer`` filled where
    ``[tokens]`` leaves them unset (the vocabulary size, pad/eos/bos ids), as the audit takes them
    (:func:`datacheck.derive.tokenizer.with_tokenizer_facts`): a guard given only the tokenizer checks
    ``tokens.out_of_vocab`` against its vocabulary instead of leaving the check out."""
    if facts is None:
        cfg = Config()
    elif isinstance(facts, Config):
        cfg = facts
    elif isinstance(facts, Mapping):
        cfg = config_from_dict(dict(facts))
    else:
        cfg = load_config(facts)
    return with_tokenizer_facts(cfg)


class BatchGuard:
    """Wrap ``collate_fn`` so every collated batch is checked (see the module docstring).

    Args:
        collate_fn: the collate function to wrap (e.g. a ``DataCollatorForLanguageModeling``); None:
            torch's ``default_collate``.
        facts: a :class:`~datacheck.model.config.Config` (``datacheck.data_config(path)``: with the classes
            the data declares, as the audit takes them; token tags declared so make 2-D labels tag ids
            when no layout is named), a ``datacheck.toml`` path, or a dict in its layout (``{"tokens": {"vocab_size": 50257}, "labels": {"ignore_index": -100}}``).
        on_error: ``"raise"`` | ``"warn"`` | ``"skip"``.
        dump_dir: folder for the failing batches (names in the module docstring); None: nothing saved.
        rank: the data-parallel rank (in dump names and messages); None: ``torch.distributed``'s rank
            when a process group is initialized when the guard is built, else ``$RANK``, else 0.

    Attributes:
        batches: batches checked so far (in this process); ``failed``: how many failed.
        failures: one dict per failing batch of this process: ``batch`` (its position, see the module
            docstring), ``where`` (its name in words), ``tag`` (the recorded step, micro-batch,
            epoch, rank, position, or None), ``worker``, ``checks`` (check ID -> rows), ``dump``.

    Raises:
        UsageError: a bad ``on_error``; ConfigError: bad facts; OptionalDependencyError: no torch.
    """

    def __init__(self, collate_fn: Callable[[list[Any]], Any] | None = None,
                 facts: Config | Mapping[str, Any] | str | Path | None = None, on_error: str = "raise",
                 dump_dir: str | Path | None = None, rank: int | None = None):
        if on_error not in ("raise", "warn", "skip"):
            raise UsageError(f"on_error must be 'raise', 'warn' or 'skip', got {on_error!r}")
        self.torch = require_torch("datacheck.torch.BatchGuard")
        self.collate_fn = collate_fn or self.torch.utils.data.default_collate
        self.cfg = _facts(facts)
        given = layout_of(self.cfg.dataset.layout, self.cfg.dataset.schema_)
        #: the rows' layout the facts name (``[dataset] layout``, or a built-in ``[dataset] schema``),
        #: else ``token_classification`` when the facts' classes are the data's token tag names
        #: (:attr:`~datacheck.model.config.Config.classes_of_tags`), or None: a batch
        #: has no rows to recognize it from; it decides what bounds 2-D labels
        self.layout: str | None = (given.name if given is not None
                                   else "token_classification" if self.cfg.classes_of_tags else None)
        self.on_error = on_error
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        cols = self.cfg.columns
        self.ids_key = cols.input_ids or "input_ids"
        self.mask_key = cols.attention_mask or "attention_mask"
        self.labels_key = cols.labels or cols.label or "labels"
        self.batches = 0
        self.failed = 0
        self.failures: list[dict[str, Any]] = []
        self.rank = rank if rank is not None else _default_rank(self.torch)
        self._pid = os.getpid()
        self._epoch_batches = 0  # batches of this process (a worker's copy counts its own)
        dt = self.cfg.numeric.compute_dtype
        self.overflow = FP16_MAX if dt == "fp16" else BF16_MAX if dt == "bf16" else None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the torch module (a module does not pickle), so a DataLoader whose workers
        start with ``spawn`` or ``forkserver`` (macOS' and Windows' default) can send the guard to them."""
        return {k: v for k, v in self.__dict__.items() if k != "torch"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.torch = require_torch("datacheck.torch.BatchGuard")

    def __call__(self, samples: list[Any]) -> Any:
        batch = self.collate_fn(samples)
        if os.getpid() != self._pid:  # a fresh DataLoader worker (a copy of the guard): its own count
            self._pid, self._epoch_batches = os.getpid(), 0
        j = self._epoch_batches
        self._epoch_batches += 1
        self.batches += 1
        tag = take_tag()  # taken for every batch: a later untagged batch never inherits it
        failures = self.check(batch)
        if not failures:
            return batch
        self.failed += 1
        return self._fail(batch, self._where(j, tag), failures)

    def _where(self, j: int, tag: BatchTag | None) -> tuple[int, str, BatchTag | None, int | None, str]:
        """(position, name in words, tag, worker, dump name stem) of this process's ``j``-th batch."""
        info = self.torch.utils.data.get_worker_info()
        worker = None if info is None else int(info.id)
        if tag is not None:
            stem = f"batch-r{tag.rank}-s{tag.step:07d}-m{tag.micro_batch}-e{tag.epoch}"
            return tag.position, tag.describe(), tag, worker, stem
        if info is None:  # the main process: the guard's own count (epochs run on)
            pos, words = j, f"batch {j} (rank {self.rank}, counted from the guard's first batch)"
        else:
            pos = j * int(info.num_workers) + int(info.id)
            words = f"batch {pos} of the loader's iteration (rank {self.rank}, worker {worker}'s batch {j})"
        return pos, words, None, worker, f"batch-r{self.rank}-w{worker if worker is not None else 0}-{pos:06d}"

    def check(self, batch: Any) -> dict[str, list[int]]:
        """check ID -> failing 0-based rows of ``batch`` (``[]``: batch-wide); empty when it passes."""
        torch = self.torch
        if not isinstance(batch, Mapping):
            batch = {str(i): t for i, t in enumerate(batch)} if isinstance(batch, (list, tuple)) else {"batch": batch}
        tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
        ids, mask, labels = (tensors.get(self.ids_key), tensors.get(self.mask_key), tensors.get(self.labels_key))
        shapes = {k: tuple(t.shape) for k, t in ((self.ids_key, ids), (self.mask_key, mask), (self.labels_key, labels))
                  if t is not None and t.dim() >= 2}
        if len(set(shapes.values())) > 1:
            return {"length.mismatch": []}
        first = next(iter(tensors.values()), None)
        if first is None or first.dim() == 0:
            return {}
        b = first.shape[0]
        names: list[str] = []
        flags: list[Any] = []

        def add(cid: str, per_row: Any) -> None:
            names.append(cid)
            flags.append(per_row)

        def rows(t: Any) -> Any:
            return t.reshape(t.shape[0], -1)

        tok, lab = self.cfg.tokens, self.cfg.labels
        ign = lab.ignore
        for t in tensors.values():
            if t.is_floating_point() and t.dim() >= 1 and t.shape[0] == b:
                r = rows(t)
                add("finite.nan", torch.isnan(r).any(1))
                add("finite.inf", torch.isinf(r).any(1))
                if self.overflow is not None:
                    add("finite.fp16_overflow", (r.abs() > self.overflow).logical_and(torch.isfinite(r)).any(1))
        if ids is not None and tok.vocab_size is not None and not ids.is_floating_point():
            r = rows(ids)
            add("tokens.out_of_vocab", ((r < 0) | (r >= tok.vocab_size)).any(1))
        if labels is not None and not labels.is_floating_point():
            r = rows(labels)
            top = self.cfg.token_label_bound(self.layout)[0] if labels.dim() >= 2 else self.cfg.class_label_bound()
            ignored = (r == ign) if ign is not None else torch.zeros_like(r, dtype=torch.bool)
            add("labels.unexpected_sentinel", ((r < 0) & ~ignored).any(1))
            if top is not None:
                add("labels.out_of_range", ((r >= top) & ~ignored).any(1))
            elif labels.dim() == 1 and lab.classes is not None:  # the classes are the label values themselves
                values = torch.tensor([int(v) for v in lab.classes], device=r.device, dtype=r.dtype)
                add("labels.out_of_range", (~torch.isin(r, values) & (r >= 0) & ~ignored).any(1))
            if labels.dim() >= 2:
                sup = (~ignored).sum(1)
                add("empty.no_supervised_tokens", sup == 0)
                add("batch.no_supervised_tokens", (sup.sum() == 0).expand(b))
        for key, tag_names in sorted((lab.tag_classes or {}).items()):  # each token tag column by its own names
            t = tensors.get(key)
            if key == self.labels_key or t is None or t.is_floating_point() or t.dim() < 1 or t.shape[0] != b:
                continue
            r = rows(t)
            ignored = (r == ign) if ign is not None else torch.zeros_like(r, dtype=torch.bool)
            add("labels.unexpected_sentinel", ((r < 0) & ~ignored).any(1))
            add("labels.out_of_range", ((r >= len(tag_names)) & ~ignored).any(1))
        if mask is not None and not mask.is_floating_point():
            r = rows(mask)
            add("mask.non_binary", ((r != 0) & (r != 1)).any(1))
            add("empty.all_padding", r.sum(1) == 0)
        if not flags:
            return {}
        table = torch.stack(flags)  # (checks, rows)
        if not bool(table.any()):  # the one host sync of a passing batch
            return {}
        out: dict[str, list[int]] = {}
        for name, row in zip(names, table.cpu()):
            hit = row.nonzero().flatten().tolist()
            if hit:
                merged = sorted(set(out.get(name, [])) | set(hit))
                out[name] = [] if name == "batch.no_supervised_tokens" else merged
        return out

    def _dump(self, batch: Any, where: tuple[int, str, BatchTag | None, int | None, str],
              failures: dict[str, list[int]]) -> str | None:
        if self.dump_dir is None:
            return None
        torch = self.torch
        pos, words, tag, worker, stem = where
        items = batch.items() if isinstance(batch, Mapping) else enumerate(batch if isinstance(batch, (list, tuple)) else [batch])
        tensors = {str(k): v.detach().cpu() for k, v in items if isinstance(v, torch.Tensor)}
        plain = {"batch": pos, "where": words, "rank": self.rank, "worker": worker,
                 "tag": None if tag is None else tag._asdict(),
                 "failures": {k: list(v) for k, v in failures.items()}, "facts": self.cfg.to_dict()}
        path = self.dump_dir / f"{stem}.pt"
        k = 0
        while path.exists():  # a later epoch's batch at the same position: never overwrite an earlier dump
            k += 1
            path = self.dump_dir / f"{stem}-{k}.pt"
        write_atomic(path, lambda f: torch.save({"tensors": tensors, "meta": plain}, f))
        return str(path)

    def _fail(self, batch: Any, where: tuple[int, str, BatchTag | None, int | None, str],
              failures: dict[str, list[int]]) -> Any:
        dump = self._dump(batch, where, failures)
        n, words, tag, worker = where[0], where[1], where[2], where[3]
        self.failures.append({"batch": n, "where": words, "tag": None if tag is None else tag._asdict(),
                              "worker": worker, "checks": {k: list(v) for k, v in failures.items()}, "dump": dump})
        parts = [f"{cid} (rows {v[:10]}{' ...' if len(v) > 10 else ''})" if v else f"{cid} (whole batch)"
                 for cid, v in sorted(failures.items())]
        msg = (f"{words} fails: " + "; ".join(parts)
               + (f"; saved to {dump} (torch.load(path, weights_only=True))" if dump else "")
               + ("; its rows are in the record_batches ledger at that step" if tag is not None else
                  "; find the rows' source with datacheck plan --step or a record_batches ledger"))
        if self.on_error == "raise":
            raise BatchValidationError(msg, batch=n, failures=failures, dump=dump)
        if self.on_error == "warn":
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            return batch
        bad = sorted({r for v in failures.values() for r in v})
        if any(not v for v in failures.values()) or not isinstance(batch, Mapping):
            return None
        torch = self.torch
        first = next(v for v in batch.values() if isinstance(v, torch.Tensor))
        keep = torch.tensor([i for i in range(first.shape[0]) if i not in set(bad)], dtype=torch.long)
        if keep.numel() == 0:
            return None
        sel = {k: (v.index_select(0, keep) if isinstance(v, torch.Tensor) and v.dim() >= 1
                   and v.shape[0] == first.shape[0] else v) for k, v in batch.items()}
        try:
            return type(batch)(sel)
        except TypeError:
            return sel


def _default_rank(torch: Any) -> int:
    """torch.distributed's rank when a process group is initialized, else ``$RANK``, else 0."""
    dist = getattr(torch, "distributed", None)
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    env = os.environ.get("RANK", "")
    return int(env) if env.isdigit() else 0
