"""Training-log readers: every format into one stream of :class:`~datacheck.trace.record.StepRecord`.

Formats (``--format``; ``auto`` sniffs):

============== =====================================================================================
``hf_state``   Hugging Face ``trainer_state.json`` (``log_history``)
``jsonl``      one JSON object per line (any trainer's metrics logger, W&B ``wandb-history.jsonl``)
``csv``        a CSV with a header (Lightning ``CSVLogger``, a W&B history export)
``tensorboard`` event files (``events.out.tfevents.*``, or a folder holding them)
``text``       a console log read line by line with every line format below (mixed formats are fine)
``megatron``   Megatron-LM iteration lines only
``deepspeed``  DeepSpeed ``OVERFLOW!`` / apex ``Gradient overflow`` lines only
``hf_console`` Hugging Face Trainer dict lines only (the run-summary dict, ``train_runtime`` /
               ``total_flos``, is counted as ``hf_summary``: its ``train_loss`` is the run's mean, no step's)
``key_value``  ``key value`` / ``key: value`` / ``key=value`` lines only (nanoGPT, mlx-lm, mmengine, llm.c)
``stated``     lines that state a bad value (``Bad grad_norm detected (grad_norm=nan)``, ``Loss is Infinity``)
``coqui``      Coqui TTS trainer blocks (``--> TIME: ... GLOBAL_STEP: N`` then ``| > loss: X`` lines)
``regex``      a user regex with named groups (``--regex``)
============== =====================================================================================

Sniffing (``auto``): a name with ``tfevents``, a folder, or a file that opens as a TFRecord whose
first event is TensorBoard's file version -> tensorboard; ``.csv``/``.tsv`` -> csv;
a JSON document whose first 64 KiB mention ``"log_history"`` -> hf_state; ``.jsonl``/``.ndjson`` or a
first non-blank line starting with ``{"`` -> jsonl; anything else -> text. Per-rank logs: a ``rankN``
in the file name gives the rank of records that carry none.

Launcher prefixes: the text reader takes a line's rank from the prefix its launcher wrote and reads
the rest of the line: torchrun's ``[rank3]:`` (``--local-ranks-filter``/``--tee``) and ``[default3]:``
(``--tee``/``--redirects``: the local rank), and OpenMPI's ``--tag-output`` ``[1,3]<stdout>:``. So the
interleaved output of all ranks in one file is read per rank, not as one rank logging each step twice.

A crash: the text reader's formats also follow Python tracebacks (:mod:`~datacheck.trace.readers.crash`);
the one a console ends with, no training record of its rank after it, is ``ReadStats.crash``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from datacheck.io.bounded import dangling_link, special_kind
from datacheck.model.errors import OptionalDependencyError, UsageError
from datacheck.model.identity import IDENTITY_PREFIX, parse_identity
from datacheck.trace.readers import coqui, crash, deepspeed, keyvalue, megatron, pydict, stated
from datacheck.trace.readers.fields import MAX_RANK, RANK_IN_NAME, BadValue, bounded_int
from datacheck.trace.readers.files import iter_lines, read_csv, read_jsonl, read_tensorboard
from datacheck.trace.readers.hfstate import read_hf_state
from datacheck.trace.readers.keyed import record_from_mapping
from datacheck.trace.record import EPOCH_STEP_NOTE, ReadStats, StepRecord, is_finite

__all__ = ["FORMATS", "LINE_FORMATS", "LogFile", "sniff", "open_log", "split_rank_prefix"]

#: a launcher's rank prefix at the start of a line (see the module docstring): torchrun's
#: ``[rankN]:`` / ``[defaultN]:``, OpenMPI's ``[job,N]<stdout>:`` / ``<stderr>:``
_RANK_PREFIX = re.compile(r"\[(?:rank|default)(\d{1,7})\]:[ \t]?|\[\d+,(\d{1,7})\]<std(?:out|err)>:[ \t]?")


def split_rank_prefix(text: str) -> tuple[int | None, str]:
    """(rank, rest of the line) of a line starting with a launcher's rank prefix, else (None, text)."""
    if not text.startswith("["):
        return None, text
    m = _RANK_PREFIX.match(text)
    if m is None:
        return None, text
    r = int(m.group(1) or m.group(2))
    return (r, text[m.end():]) if r < MAX_RANK else (None, text)

#: line formats of the ``text`` reader, tried in this order on every line
LINE_FORMATS: dict[str, Callable[[str], dict[str, Any] | None]] = {
    megatron.NAME: megatron.parse_line,
    deepspeed.NAME: deepspeed.parse_line,
    pydict.NAME: pydict.parse_line,
    keyvalue.NAME: keyvalue.parse_line,
    stated.NAME: stated.parse_line,
}
FORMATS = ("auto", "hf_state", "jsonl", "csv", "tensorboard", "text", *LINE_FORMATS, coqui.NAME, "regex")
_SNIFF_BYTES = 64 * 1024


def sniff(path: Path) -> str:
    """The format of ``path`` by name and first bytes (see the module docstring)."""
    if path.is_dir() or "tfevents" in path.name:
        return "tensorboard"
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return "csv"
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if len(head) >= 12 and 0 < int.from_bytes(head[:8], "little") <= 4096 \
            and b"brain.Event" in head[12:12 + int.from_bytes(head[:8], "little")]:
        return "tensorboard"  # a TFRecord whose first event is the file version, whatever the file's name
    stripped = head.lstrip()
    if stripped.startswith(b"{") and b'"log_history"' in head:
        return "hf_state"
    if suffix in (".jsonl", ".ndjson") or stripped.startswith(b'{"'):
        return "jsonl"
    return "text"


@dataclass
class LogFile:
    """One log (a file, or a TensorBoard folder) and how to read it.

    Attributes:
        path: the file or folder.
        source: its name in messages (the path as given).
        format: the format read (sniffed or forced).
        rank: the rank from the file name (``rank3``), or None.
        regex: the user's compiled ``--regex`` (format ``regex``).
        steps_per_epoch: optimizer steps per epoch (``--steps-per-epoch``), to place Hugging Face
            console records that carry only an epoch; the log's own header wins.
        steps_per_epoch_from: where ``steps_per_epoch`` came from, for messages (``--steps-per-epoch``,
            the ``[batch]`` plan).
        epoch_refused: why ``steps_per_epoch`` places no record of this log (set by
            :func:`datacheck.trace.run.trace_logs` after a read whose ``stats.epoch_clash`` showed
            that it puts two training records on one step); None: it places them.
        stats: filled while :meth:`records` is iterated.
    """

    path: Path
    source: str
    format: str
    rank: int | None = None
    regex: re.Pattern[str] | None = None
    steps_per_epoch: int | None = None
    steps_per_epoch_from: str = "--steps-per-epoch"
    epoch_refused: str | None = None
    stats: ReadStats = field(init=False)

    def __post_init__(self) -> None:
        self.stats = ReadStats(self.source, self.format)

    def records(self) -> Iterator[StepRecord]:
        """The log's step records, streamed, in file order (a fresh read each call; stats reset)."""
        self.stats = ReadStats(self.source, self.format)
        fmt, st = self.format, self.stats
        if fmt == "hf_state":
            yield from self._counted(read_hf_state(self.path, self.source, st, self.rank))
        elif fmt == "jsonl":
            yield from self._counted(read_jsonl(self.path, self.source, st, self.rank))
        elif fmt == "csv":
            yield from self._counted(read_csv(self.path, self.source, st, self.rank))
        elif fmt == "tensorboard":
            files = sorted(p for p in self.path.rglob("*tfevents*") if p.is_file()) if self.path.is_dir() \
                else [self.path]
            yield from self._counted(read_tensorboard(files, self.source, st, self.rank))
        else:
            yield from self._counted(self._text())

    def _counted(self, it: Iterator[StepRecord]) -> Iterator[StepRecord]:
        for rec in it:
            self.stats.records += 1
            yield rec

    def _text(self) -> Iterator[StepRecord]:
        if self.format == "regex":
            rx = self.regex
            if rx is None:
                raise UsageError("--format regex needs --regex PATTERN with a (?P<step>...) group")
            parsers: dict[str, Callable[[str], dict[str, Any] | None]] = {
                "regex": lambda t: keyvalue.parse_with_regex(t, rx)}
        elif self.format == "text":
            parsers = LINE_FORMATS
        elif self.format == coqui.NAME:
            parsers = {}
        else:
            parsers = {self.format: LINE_FORMATS[self.format]}
        coq = coqui.CoquiBlocks() if self.format in ("text", coqui.NAME) else None
        ctx = _TextState()
        st = self.stats
        order = list(parsers.items())  # priority order (a Megatron line would parse as key_value too);
        # each parser rejects a line that is not its own by a substring test before any regex
        tqdm = deepspeed.TQDM
        line_rank: dict[int, int] = {}  # line -> the rank its launcher prefix named
        data_lines = st.dataset_lines = megatron.DatasetLines() if self.format in ("text", megatron.NAME) else None

        teed: set[int] = set()  # lines a launcher merged from a process's separate stdout and stderr (torchrun's
        # --tee [defaultN]:, OpenMPI's <stdout>/<stderr> tags): their order across the two streams is not kept

        def unprefixed(lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
            for n, text in lines:
                r, rest = split_rank_prefix(text)
                if r is not None:
                    line_rank[n] = r
                    if not text.startswith("[rank"):
                        teed.add(n)
                yield n, rest

        seg = 0  # texts read: a line's \r segments (tqdm's redraws) share its number, each counted here
        for n, text in self._joined(unprefixed(iter_lines(self.path, st))):
            seg += 1
            prefix_rank = line_rank.pop(n, None) if line_rank else None
            tee = n in teed
            if tee:
                teed.discard(n)
            if not text or text.isspace():
                continue
            if text[0] == "[":  # torch prints a traceback with its own [rankN]: (torchrun's --tee adds [defaultN]:)
                r2, inner = split_rank_prefix(text)
                ctx.tracebacks.line(n, inner, r2 if r2 is not None else prefix_rank, tee)
            else:
                ctx.tracebacks.line(n, text, prefix_rank, tee)
            if ctx.waiting is not None and "<" in text and (t := tqdm.search(text)) is not None:
                # the bar tqdm redraws right after writing the dict holds the step it was logged at
                w, ctx.waiting = ctx.waiting, None
                w.step = max(w.step, int(t.group(1)))
                yield from self._emit(w, ctx)
            if data_lines is not None:
                data_lines.feed(n, text)  # a dataset line is read for its facts, and then as any line
            if ("*****" in text and pydict.BANNER in text) or megatron.begins_launch(text):
                st.launches += 1  # a launch's banner: a restart into the same log is told by it
            if IDENTITY_PREFIX in text:
                ident = parse_identity(text)
                if ident:
                    st.identity = ident
                    continue
            if coq is not None and (coq.block is not None or "-->" in text):
                done, mine = coq.feed(n, text)
                if done is not None:
                    yield from self._coqui_record(done, ctx)
                if mine:
                    continue
            if " = " in text and self.format in ("text", pydict.NAME):
                h = pydict.parse_header(text)
                if h is not None:
                    ctx.header[h[0]] = h[1]
                    continue
            for name, parse in order:
                try:
                    got = parse(text)
                except BadValue as exc:
                    st.bad(n, f"{text[:120]} ({exc})")
                    break
                if got is None:
                    continue
                if name == pydict.NAME and ("train_runtime" in got or "total_flos" in got):
                    # the Trainer's run summary: a known record, not a step (its train_loss is the run's mean)
                    st.notes.add(HF_SUMMARY_NOTE)
                    st.line_formats[HF_SUMMARY] = st.line_formats.get(HF_SUMMARY, 0) + 1
                    break
                if prefix_rank is not None and got.get("rank") is None:
                    got["rank"] = prefix_rank
                rec = self._record(name, got, n, ctx)
                if rec is None:
                    st.bad(n, f"{text[:120]} (no metric)")
                    break
                st.line_formats[name] = st.line_formats.get(name, 0) + 1
                if name == stated.NAME and "step" not in got:
                    ctx.pending.append(rec)  # placed on the next record of its rank
                    break
                if ctx.waiting is not None:  # no bar came between: its count so far stands
                    w, ctx.waiting = ctx.waiting, None
                    yield from self._emit(w, ctx)
                if ctx.await_bar:
                    ctx.await_bar, ctx.waiting = False, rec
                    break
                yield from self._emit(rec, ctx)
                break
            if "<" in text:  # a tqdm bar's "n/total [elapsed<remaining": the last one on the line
                for t in tqdm.finditer(text):
                    ctx.tqdm_step, ctx.tqdm_total = int(t.group(1)), int(t.group(2))
                    ctx.tqdm_mark = seg
        if ctx.waiting is not None:
            yield from self._emit(ctx.waiting, ctx)
            ctx.waiting = None
        if coq is not None and (done := coq.finish()) is not None:
            yield from self._coqui_record(done, ctx)
        for rec in ctx.pending:  # stated values after the last metrics record: after it
            prev = ctx.last.get(rec.rank)
            rec.step = FIRST_RECORD if prev is None else prev + 1
            yield rec
        ctx.pending.clear()
        st.crash = ctx.tracebacks.crash()
        if ctx.positioned and not ctx.stepped:  # apex's and DeepSpeed's overflow lines alone: no step anywhere
            st.unplaced = st.unplaced or NO_LINE_STEP

    def _emit(self, rec: StepRecord, ctx: "_TextState") -> Iterator[StepRecord]:
        """``rec`` after the stated values waiting for it; it becomes its rank's last step."""
        if ctx.pending:
            yield from self._place_pending(ctx, rec)
        if rec.split == "train":
            ctx.last[rec.rank] = rec.step
            ctx.tracebacks.trained(rec.rank, rec.line)
        yield rec

    def _joined(self, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """The log's lines with a record wrapped onto the next lines joined (numbered by its first
        line): a printed dict not closed on its line (soft wrap: joined with a blank, at most
        :data:`_WRAP_LINES` lines), a Megatron iteration line that does not end with its ``|`` followed
        by a line that does and starts no iteration (a terminal's hard wrap: joined as written)."""
        held: tuple[int, str, str, int] | None = None
        for n, text in lines:
            if held is None and (text.endswith("|") or ("{'" not in text and "iteration" not in text)):
                yield n, text  # the common line, decided without a call
                continue
            if held is not None:
                n0, t0, kind, parts = held
                held = None
                if kind == "dict":
                    joined = t0 + " " + text.strip()
                    if "}" not in joined[joined.find("{'"):] and parts < _WRAP_LINES:
                        held = (n0, joined, kind, parts + 1)
                    else:
                        yield n0, joined
                    continue
                if text.rstrip().endswith("|") and not megatron.starts_iteration(text):
                    yield n0, t0 + text
                    continue
                yield n0, t0
            if "{'" in text and "}" not in text[text.find("{'"):]:
                held = (n, text, "dict", 1)
            elif megatron.cut_iteration(text):
                held = (n, text, "megatron", 1)
            else:
                yield n, text
        if held is not None:
            if held[2] == "dict":
                self.stats.bad(held[0], f"{held[1][:120]} (a printed dict not closed within {_WRAP_LINES} lines)")
            else:
                yield held[0], held[1]  # a log cut mid-line: the fields before the cut are kept

    def _state_step(self, ctx: "_TextState", epoch: Any, sig4: bool) -> int | None:
        """The step the run's ``trainer_state.json`` (beside the log, or in its newest ``checkpoint-N``
        folder) records for this epoch, or None. The console prints the floats the Trainer appends to
        ``log_history``: the same value, or (``sig4``) its ``f"{v:.4g}"``; an epoch two entries share
        in that form names no entry."""
        if ctx.state_steps is None:
            ctx.state_steps = {}
            for cand in _trainer_states(self.path):
                try:
                    for rec in read_hf_state(cand, str(cand), ReadStats(str(cand), "hf_state"), None):
                        if rec.split != "train" or rec.epoch is None or len(ctx.state_steps) >= _STATE_MAX:
                            continue
                        for key in (rec.epoch, f"{rec.epoch:.4g}"):
                            got = ctx.state_steps.get(key, rec.step)
                            ctx.state_steps[key] = rec.step if got == rec.step else None  # None: ambiguous
                except (UsageError, OptionalDependencyError, OSError):
                    continue
                if ctx.state_steps:
                    self.stats.notes.add(f"steps from {cand}")
                    break
        try:
            return ctx.state_steps.get(str(epoch) if sig4 else float(epoch))
        except (TypeError, ValueError):
            return None

    def _coqui_record(self, done: tuple[int, dict[str, Any]], ctx: "_TextState") -> Iterator[StepRecord]:
        n, block = done
        st = self.stats
        if block.pop("\0eval", None):
            loss = block.get("avg_loss", block.get("loss"))
            block = {"step": block["step"], "eval_loss": loss}
        try:
            rec = record_from_mapping(block, self.source, n, self.rank)
        except BadValue as exc:
            st.bad(n, f"GLOBAL_STEP {block.get('step')}: {exc}")
            return
        if rec is None:
            st.bad(n, f"GLOBAL_STEP {block.get('step')}: no metric")
            return
        st.line_formats[coqui.NAME] = st.line_formats.get(coqui.NAME, 0) + 1
        yield from self._place_pending(ctx, rec)
        if rec.split == "train":
            ctx.last[rec.rank] = rec.step
            ctx.tracebacks.trained(rec.rank, rec.line)
        yield rec

    def _place_pending(self, ctx: "_TextState", rec: StepRecord) -> Iterator[StepRecord]:
        """Stated bad values seen before ``rec`` (same rank, or no rank): merged into ``rec`` when it
        logged that value as missing or finite, else yielded on its step."""
        keep = []
        for p in ctx.pending:
            if p.rank is not None and p.rank != rec.rank:
                keep.append(p)
                continue
            merged = False
            for f in ("loss", "grad_norm"):
                v = getattr(p, f)
                if v is not None and (getattr(rec, f) is None or is_finite(getattr(rec, f))):
                    setattr(rec, f, v)
                    merged = True
            if merged:
                rec.stated = p.stated if rec.stated is None else rec.stated
            else:
                p.step, p.step_inferred, p.rank = rec.step, rec.step_inferred, rec.rank
                yield p
        ctx.pending[:] = keep

    def _record(self, name: str, got: dict[str, Any], n: int, ctx: "_TextState") -> StepRecord | None:
        rank = got.pop("rank", None)
        try:
            rank = bounded_int(int(rank), "rank", "rank") if rank is not None else self.rank
        except (BadValue, ValueError, OverflowError):
            return None
        prev = ctx.last.get(rank)
        st = self.stats
        if name == pydict.NAME:
            return self._hf_record(got, n, rank, prev, ctx)
        first = got.pop("\0first", None)
        if got.pop("\0epoch_step", None):
            st.notes.add(EPOCH_STEP_NOTE)
        if st.first_step is None:
            if first is not None:
                st.knows(*first)
            elif name == megatron.NAME:
                st.knows(1, "Megatron-LM: iteration counted after the update, from 1")
        inferred = "step" not in got
        if inferred:
            got["step"] = FIRST_RECORD if prev is None else prev + 1
            ctx.positioned += 1
        else:
            ctx.stepped += 1
        split = got.pop("split", "train")
        got.pop("eval", None)
        return StepRecord(source=self.source, line=n, rank=rank, split=split, step_inferred=inferred, **got)

    def _hf_record(self, got: dict[str, Any], n: int, rank: int | None, prev: int | None,
                   ctx: "_TextState") -> StepRecord | None:
        """A Hugging Face console dict, placed on its global step: the step the run's
        ``trainer_state.json`` records for its epoch, else ``epoch`` x the update steps per epoch (the
        header's, or ``--steps-per-epoch``, or the header's total / epochs, or the plan's), else the count
        of the tqdm bar before it on its line, else of the bar tqdm redraws after writing it
        (``ctx.await_bar``: a bar on an earlier line is a lower bound); else its position, marked
        unplaced."""
        st = self.stats
        st.notes.add("hf_nan_filter")  # the Trainer's logging_nan_inf_filter, as in trainer_state.json
        same = got.pop("\0tqdm", None)
        sig4 = bool(got.pop("\0sig4", False))
        # a bar counting below the previous record's step is stale, unless it is a new bar as long as the one
        # that placed the previous record (tqdm never counts down within a bar): a new launch's training bar
        # (an evaluation's bar has the eval loader's length)
        fresh = prev is not None and ctx.tqdm_step is not None and ctx.tqdm_step < prev \
            and ctx.bar_total is not None and ctx.tqdm_total == ctx.bar_total
        bar = same if same is not None else \
            ctx.tqdm_step if ctx.tqdm_step is not None and (prev is None or ctx.tqdm_step >= prev or fresh) else None
        why = None
        step = self._state_step(ctx, got["epoch"], sig4) if "epoch" in got else None
        given = False  # placed by a steps-per-epoch from outside the log (not the Trainer's header)
        exact = False  # its epoch x that steps-per-epoch within the printing's rounding of a whole step
        if step is None:
            h = ctx.header
            spe = h.get("steps_per_epoch")
            if spe is None and self.steps_per_epoch is not None:
                spe, given = self.steps_per_epoch, True
            if spe is None and h.get("total_steps") and h.get("epochs") and h["total_steps"] % h["epochs"] == 0:
                spe = h["total_steps"] // h["epochs"]
            if given and self.epoch_refused is not None:
                why = self.epoch_refused
            elif spe is None:
                why = ("Hugging Face console records carry an epoch, not a step, and the log has no Trainer header "
                       "('Num update steps per epoch' or 'Total optimization steps' with 'Num Epochs') nor a progress "
                       "bar: pass --steps-per-epoch N (the run's update steps per epoch), give the [batch] facts "
                       "with --data, or trace the run's trainer_state.json")
            elif "epoch" not in got:
                why = "a Hugging Face console record without an epoch"
            else:
                if sig4:  # 4 significant digits: this value's own precision
                    digits = pydict.epoch_decimals(str(got["epoch"]), sig4=True)
                else:  # rounded to a number of decimals, trailing zeros dropped: the most the log has shown
                    digits = ctx.epoch_decimals = max(ctx.epoch_decimals, pydict.epoch_decimals(str(got["epoch"])))
                step, why = pydict.place_by_epoch(str(got["epoch"]), spe, digits)
                exact = pydict.on_whole_step(str(got["epoch"]), spe, digits)
        if step is None and bar is not None:
            # a bar on the dict's own line is its step; one drawn on an earlier line (a ``\r`` segment)
            # may be stale (tqdm redraws at most every 0.1 s): a lower bound, raised by the bar tqdm
            # redraws after writing the dict
            step, why, ctx.await_bar = bar, None, same is None
            ctx.bar_total = ctx.tqdm_total
        ctx.ordinal += 1
        try:
            rec = record_from_mapping(got, self.source, n, rank, fallback_step=step if step is not None else
                                      ctx.ordinal if prev is None else prev + 1)  # a position, not a step
        except BadValue:
            return None
        if rec is None:
            return None
        rec.step_inferred = step is None
        if fresh and same is None and rec.split == "train" and ctx.fresh_bar != ctx.tqdm_mark:
            ctx.fresh_bar = ctx.tqdm_mark  # counted once per bar drawn
            st.launches += 1  # a training dict after a new bar counting from below the last step: a new launch
        if step is None:
            st.unplaced = st.unplaced or why
        else:
            st.knows(pydict.HF_FIRST_STEP, pydict.HF_WHY)
            if given and why is None and rec.split == "train":
                self._epoch_clash(rec, ctx, spe, exact)
        return rec

    def _epoch_clash(self, rec: StepRecord, ctx: "_TextState", spe: int, exact: bool) -> None:
        """Note in ``stats.epoch_clash`` when a steps-per-epoch from outside the log puts ``rec``, a
        training record, on the step of the rank's previous training record placed that way: the
        Trainer logs one training dict per global step (``Trainer._maybe_log_save_evaluate``; its
        eval and final-summary dicts at the same step are not training records), so that
        steps-per-epoch is not this run's, or its printed epochs cannot tell the steps apart.

        Within one launch the Trainer's epoch grows with every update (``epoch + (micro-batch + 1) /
        steps_in_epoch``), so a training record whose epoch is below the previous one's is a new launch's
        (a run resumed from a checkpoint, its first step the checkpoint's + 1, or restarted into the same
        console), placed from its own epoch: meeting a step the launch before logged is no clash. A
        record that repeats the previous one's printed epoch is the same step logged again by a new
        launch (a resume from the checkpoint just before the step the last launch logged last) when it
        also repeats its learning rate and the epoch falls on a whole step (``exact``: within the
        printing's rounding of ``step / steps_per_epoch``, as a Trainer's epoch is over the true steps
        per epoch); two steps of one launch whose epochs print alike (too few digits) differ in their
        learning rate under any schedule that moves every update (the ModernBERT excerpt's three dicts
        at epoch 0.53 do: a clash), and a wrong steps-per-epoch often puts the epoch between steps."""
        prev = ctx.epoch_placed.get(rec.rank)
        ctx.epoch_placed[rec.rank] = rec
        if prev is None or prev.step != rec.step or self.stats.epoch_clash is not None:
            return
        if rec.epoch is not None and prev.epoch is not None and (
                rec.epoch < prev.epoch or (rec.epoch == prev.epoch and exact and rec.lr is not None
                                           and rec.lr == prev.lr)):
            self.stats.launches += 1  # the Trainer's epoch back or the same step logged again: a new launch
            return  # a new launch's record, placed by its own epoch
        self.stats.epoch_clash = (
            f"its training records at lines {prev.line} (epoch {prev.epoch:g}) and {rec.line} (epoch {rec.epoch:g}) "
            f"both fall on step {rec.step} at {spe} steps per epoch ({self.steps_per_epoch_from}), but the Trainer "
            "logs one training record per step: the run has another number of steps per epoch, or its epochs are "
            "printed too coarsely to tell its steps apart; give the run's --steps-per-epoch N, or trace its "
            "trainer_state.json")


#: the text reader's count (``ReadStats.line_formats``) of Hugging Face Trainer run-summary dicts
#: (``{'train_runtime': ..., 'train_loss': ...}``, printed once after training): read, never a step record
HF_SUMMARY = "hf_summary"
#: the note (``ReadStats.notes``) the run summary leaves, as ``trainer_state.json``'s summary entry does
HF_SUMMARY_NOTE = "hf_summary_entry"
#: the number of a log's first record when its lines carry no step (apex's and DeepSpeed's overflow lines,
#: stated values before any metrics line): records are numbered from 1, as the Hugging Face console's
#: and a JSONL log's without steps are, so "record N" is the N-th record in every output
FIRST_RECORD = 1
#: lines a printed dict may be wrapped onto
_WRAP_LINES = 8
#: epochs remembered from a trainer_state.json
_STATE_MAX = 2_000_000


def _trainer_states(log: Path) -> list[Path]:
    """``trainer_state.json`` beside ``log``, then those of its ``checkpoint-N`` folders, newest first."""
    d = log.parent
    out = [d / "trainer_state.json"] if (d / "trainer_state.json").is_file() else []
    ckpts = [p for p in d.glob("checkpoint-*/trainer_state.json") if p.parent.name[11:].isdigit()]
    return out + sorted(ckpts, key=lambda p: -int(p.parent.name[11:]))


#: why a text log of records without step numbers cannot be placed on optimizer steps
NO_LINE_STEP = ("its lines carry no step number (fp16 overflow lines of apex and DeepSpeed print none, and no "
                "progress bar precedes them): their positions are not optimizer steps; trace the run's log that "
                "prints the step (the trainer's console or metrics file) with it")


@dataclass
class _TextState:
    """The text reader's state across lines: the last step per rank, the last tqdm count, the Trainer
    header's facts, the Hugging Face records seen, and stated bad values waiting for their step."""

    last: dict[int | None, int] = field(default_factory=dict)
    tqdm_step: int | None = None
    #: the length of the last bar drawn, and of the bar that last placed a Hugging Face record
    tqdm_total: int | None = None
    bar_total: int | None = None
    #: the text (a line or a ``\r`` segment of one, counted from 1) of the last bar drawn, and of the last
    #: bar taken as a new launch's (counted once)
    tqdm_mark: int = 0
    fresh_bar: int = -1
    header: dict[str, int] = field(default_factory=dict)
    ordinal: int = 0
    epoch_decimals: int = 0
    state_steps: dict[Any, int | None] | None = None
    await_bar: bool = False
    waiting: StepRecord | None = None
    pending: list[StepRecord] = field(default_factory=list)
    #: records whose step came from the line (a step number, a tqdm count), and those placed by position
    stepped: int = 0
    positioned: int = 0
    #: per rank, the last training record placed by a steps-per-epoch from outside the log
    epoch_placed: dict[int | None, StepRecord] = field(default_factory=dict)
    #: the Python tracebacks read (a crash: the one the log ends with)
    tracebacks: crash.Tracebacks = field(default_factory=crash.Tracebacks)


def open_log(path: str, fmt: str = "auto", regex: str | None = None, steps_per_epoch: int | None = None,
             steps_per_epoch_from: str = "--steps-per-epoch") -> LogFile:
    """A :class:`LogFile` for ``path`` (format sniffed unless ``fmt`` forces one; ``steps_per_epoch``
    and ``steps_per_epoch_from``: see :class:`LogFile`).

    Raises:
        UsageError: the path does not exist, the format is unknown, ``--regex`` does not compile or
            has no ``step`` group, or ``regex`` is given with a non-line format.
    """
    p = Path(path)
    if not p.exists():
        link = dangling_link(path)
        raise UsageError(f"log {path!r} does not exist" if link is None else f"log {path!r}: {link}")
    kind = special_kind(p)
    if kind is not None and kind != "a folder":  # a FIFO blocks the open, a device never ends
        raise UsageError(f"log {path!r} is not a regular file ({kind}): never opened; give the log file")
    if fmt not in FORMATS:
        raise UsageError(f"unknown log format {fmt!r}; expected one of {', '.join(FORMATS)}")
    rx = None
    if regex is not None:
        try:
            rx = re.compile(regex)
        except re.error as exc:
            raise UsageError(f"--regex {regex!r} does not compile: {exc}") from None
        if "step" not in rx.groupindex:
            raise UsageError(f"--regex {regex!r} needs a named group (?P<step>...) (and e.g. (?P<loss>...))")
        fmt = "regex"
    elif fmt == "regex":
        raise UsageError("--format regex needs --regex PATTERN")
    if p.is_dir() and fmt not in ("auto", "tensorboard"):
        raise UsageError(f"log {path!r} is a folder: only TensorBoard logs are read as folders (give the file)")
    chosen = sniff(p) if fmt == "auto" else fmt
    if chosen == "tensorboard" and p.is_dir() and not any(p.rglob("*tfevents*")):
        raise UsageError(f"folder {path!r} holds no TensorBoard event file (events.out.tfevents.*); give a log file")
    m = RANK_IN_NAME.search(p.name)
    rank = int(m.group(1)) if m and len(m.group(1)) <= 7 and int(m.group(1)) < MAX_RANK else None
    return LogFile(path=p, source=path, format=chosen, rank=rank, regex=rx, steps_per_epoch=steps_per_epoch,
                   steps_per_epoch_from=steps_per_epoch_from)
