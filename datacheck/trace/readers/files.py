"""Whole-file log formats: JSONL metrics, CSV metrics, TensorBoard event files. Each streams records
(JSONL/CSV one line at a time, TensorBoard one event at a time). Hugging Face ``trainer_state.json``
is streamed by :mod:`datacheck.trace.readers.hfstate`."""
from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

from datacheck.io import safejson
from datacheck.io.safejson import MAX_JSON_DEPTH
from datacheck.model.errors import OptionalDependencyError
from datacheck.trace.readers.fields import LIGHTNING_LAYOUT_WHY, BadValue, keyed_convention, lightning_logger_dir
from datacheck.trace.readers.keyed import eval_record_beside, record_from_mapping
from datacheck.trace.record import ReadStats, StepRecord

__all__ = ["read_jsonl", "read_csv", "read_tensorboard", "MAX_LINE_CHARS", "iter_lines"]

#: Longest line read (characters); a longer line is cut there and counted as unparsed, so a file
#: without newlines cannot exhaust memory.
MAX_LINE_CHARS = 1 << 20
#: TensorBoard steps held while their tags arrive (events of one step are written together).
_TB_PENDING = 64


def iter_lines(path: Path, stats: ReadStats) -> Iterator[tuple[int, str]]:
    """``(1-based line, text)`` of a text file, streamed (undecodable bytes replaced). Lines are
    numbered as editors and ``grep -n`` number them: a line ends at ``\\n`` (``\\r\\n`` is one line
    end), and ``stats.lines`` is the count of lines so numbered. A ``\\r`` alone within a line (tqdm
    redrawing its bar) parts it into segments, each given as a text of its own with the line's number,
    so a record written between two redraws is read and cited at the line ``grep -n`` shows it on. No
    other character ends a line (not the vertical tab, form feed, ``\\x1c``-``\\x1e``, ``\\x85``,
    ``\\u2028``, ``\\u2029`` that ``str.splitlines`` splits at). A segment over
    :data:`MAX_LINE_CHARS` is counted as unparsed and skipped to its end."""
    with open(path, encoding="utf-8", errors="replace", newline="") as f:  # "": no \r, \r\n -> \n rewriting
        n = 1
        while True:
            text = f.readline(MAX_LINE_CHARS)  # up to \n, \r\n or a lone \r (kept), or the limit
            if not text:
                return
            stats.lines = n
            if len(text) >= MAX_LINE_CHARS and not text.endswith(("\n", "\r")):
                stats.bad(n, f"line longer than {MAX_LINE_CHARS} characters: {text[:80]}")
                while text and not text.endswith(("\n", "\r")):
                    text = f.readline(MAX_LINE_CHARS)
                if text.endswith("\n"):
                    n += 1
                continue
            if text.endswith("\n"):
                yield n, text[:-2] if text.endswith("\r\n") else text[:-1]
                n += 1
            else:  # a \r segment, or the last line without its newline
                yield n, text[:-1] if text.endswith("\r") else text


NO_STEP = ("the records carry no step key (step, global_step, _step, iter, iteration): their positions are not "
           "optimizer steps; log the step with each record")


def _no_step(stats: ReadStats, rec: StepRecord, last: int | None) -> None:
    """A record without a step before any record with one: the log cannot be joined to steps."""
    if rec.step_inferred and last is None:
        stats.unplaced = stats.unplaced or NO_STEP


#: a JSON string, or a bare non-finite spelling outside strings (``nan``, ``-inf``, ``+Infinity``, any
#: case) that a metrics logger formatting floats itself writes where JSON has no literal. A string left
#: open runs to the end of the line (a lone backslash last included): the line is no JSON then, whatever
#: follows, and a pattern that had to close it was retried from every later quote (quadratic time).
_BARE_NON_FINITE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|(?<![\w.+-])([-+]?)(nan|inf(?:inity)?)(?![\w.])',
                              re.IGNORECASE | re.DOTALL)


def _non_finite_literals(text: str) -> str | None:
    """``text`` with its bare non-finite spellings as Python's json reads them (``NaN``,
    ``Infinity``, ``-Infinity``; ``-nan`` is NaN), strings left as they are; None when it holds none."""
    found = False

    def sub(m: re.Match[str]) -> str:
        nonlocal found
        if m.group(2) is None:
            return m.group(0)
        found = True
        if m.group(2).lower() == "nan":
            return "NaN"
        return "-Infinity" if m.group(1) == "-" else "Infinity"

    out = _BARE_NON_FINITE.sub(sub, text)
    return out if found else None


def _load_line(text: str) -> Any:
    """One JSONL line: deep nesting through the depth-bounded loader (json.loads recurses), flat lines
    by json.loads; a line that does not parse is read again with its bare ``nan``/``inf`` spellings
    as JSON's non-finite literals (a logger that formats its floats itself writes ``"loss": nan``).

    Raises:
        ValueError: the line is not JSON even so (the first parser's message).
    """
    try:
        return safejson.loads(text) if text.count("[") + text.count("{") > MAX_JSON_DEPTH else json.loads(text)
    except ValueError:
        fixed = _non_finite_literals(text)
        if fixed is None:
            raise
        try:
            return safejson.loads(fixed) if fixed.count("[") + fixed.count("{") > MAX_JSON_DEPTH else json.loads(fixed)
        except ValueError:
            pass
        raise


def read_jsonl(path: Path, source: str, stats: ReadStats, rank: int | None) -> Iterator[StepRecord]:
    """One JSON object per line (NaN/Infinity accepted, as Python's json writes them, and the bare
    ``nan``/``inf``/``-inf`` spellings, any case, that loggers formatting floats themselves write). A
    line that is not a JSON object, or whose metric is not a number, is counted as unparsed; an object
    without a step gets the previous step + 1 (``step_inferred``), and a log that starts without one is
    unplaced (``stats.unplaced``: no rows are named from it)."""
    last: int | None = None
    for n, text in iter_lines(path, stats):
        if not text.strip():
            continue
        try:
            obj = _load_line(text)
            if not isinstance(obj, dict):
                raise BadValue(f"a JSON {type(obj).__name__}, not an object")
            if "datacheck_index_hash" in obj and "datacheck_config_hash" in obj:
                stats.identity = (str(obj["datacheck_index_hash"]), str(obj["datacheck_config_hash"]))
            rec = record_from_mapping(obj, source, n, rank, fallback_step=1 if last is None else last + 1)
        except (ValueError, BadValue) as exc:
            stats.bad(n, f"{text[:120]} ({str(exc).splitlines()[0][:80]})")
            continue
        if rec is not None:
            if last is None and (conv := keyed_convention(obj)) is not None:
                stats.knows(*conv)
            _no_step(stats, rec, last)
            last = rec.step
            yield rec
            ev = eval_record_beside(obj, rec)
            if ev is not None:
                yield ev


def _bounded_lines(f: Any, stats: ReadStats, at: list[int]) -> Iterator[str]:
    """The lines of text file ``f`` (opened with ``newline=""``; newline kept) as :mod:`csv` reads them
    (a lone ``\\r`` ends one too), each read with at most :data:`MAX_LINE_CHARS` characters: a longer
    line is counted as unparsed, skipped to its end and given as an empty line (csv skips it).
    ``at[0]`` is the number, as editors and ``grep -n`` count lines (:func:`iter_lines`: ``\\n`` ends
    one), of the line the last text given lies on."""
    n = 1
    while True:
        text = f.readline(MAX_LINE_CHARS)
        if not text:
            return
        at[0] = n
        if len(text) >= MAX_LINE_CHARS and not text.endswith(("\n", "\r")):
            stats.bad(n, f"line longer than {MAX_LINE_CHARS} characters: {text[:80]}")
            while text and not text.endswith(("\n", "\r")):
                text = f.readline(MAX_LINE_CHARS)
            if text.endswith("\n"):
                n += 1
            yield "\n"
            continue
        if text.endswith("\n"):
            n += 1
        yield text


def read_csv(path: Path, source: str, stats: ReadStats, rank: int | None) -> Iterator[StepRecord]:
    """A CSV with a header (Lightning ``CSVLogger`` ``metrics.csv``, a W&B history export): one row
    per logged step; empty cells are "not logged". Rows holding no training/eval metric (e.g.
    Lightning's separate validation rows without a loss column filled) give no record. The step count
    is known from the header's keys (:func:`keyed_convention`), or from Lightning's layout
    (:func:`lightning_logger_dir` with ``epoch`` and ``step`` columns: from 0). A line over
    :data:`MAX_LINE_CHARS`, or a row :mod:`csv` refuses (a field past its field size limit), is
    counted as unparsed."""
    delim = "\t" if path.suffix.lower() == ".tsv" else ","
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        at = [0]  # the line (grep -n's count) of the text csv read last: a row's last line
        reader = csv.DictReader(_bounded_lines(f, stats, at), delimiter=delim)
        last: int | None = None
        conv = keyed_convention(reader.fieldnames or [])
        if conv is None and lightning_logger_dir(path, "csv") \
                and {"epoch", "step"} <= {str(k).strip().lower() for k in reader.fieldnames or []}:
            conv = 0, LIGHTNING_LAYOUT_WHY  # CSVLogger's sorted header holds the Trainer's epoch and step
        if conv is not None:
            stats.knows(*conv)
        rows = iter(reader)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as exc:  # a field past csv's field_size_limit, a NUL, an unclosed quote
                stats.bad(at[0], f"not a CSV row ({exc})")
                continue
            n = at[0]
            stats.lines = n
            if None in row:  # more cells than header names
                stats.bad(n, f"{len(row[None]) + len(row) - 1} cells for {len(reader.fieldnames or [])} columns")
                continue
            try:
                rec = record_from_mapping(row, source, n, rank, fallback_step=1 if last is None else last + 1)
            except BadValue as exc:
                stats.bad(n, f"{','.join(str(v) for v in row.values())[:120]} ({exc})")
                continue
            if rec is not None:
                _no_step(stats, rec, last)
                last = rec.step
                yield rec
                ev = eval_record_beside(row, rec)
                if ev is not None:
                    yield ev


def _tb_value(v: Any) -> float | None:
    if v.HasField("simple_value"):
        return float(v.simple_value)
    if v.HasField("tensor") and v.tensor.float_val:
        return float(v.tensor.float_val[0])
    if v.HasField("tensor") and v.tensor.double_val:
        return float(v.tensor.double_val[0])
    return None


def _tb_begun(path: Path, loader: Any) -> float:
    """The wall time (seconds since the epoch) of an event file's first event (its file-version record,
    written when the writer opened it); ``inf`` when none can be read (such a file is read last)."""
    try:
        for ev in loader(str(path)).Load():
            if ev.wall_time:
                return float(ev.wall_time)
    except Exception:  # noqa: BLE001 - an unreadable file: read_tensorboard says so when it reads it
        pass
    return math.inf


def read_tensorboard(files: list[Path], source: str, stats: ReadStats, rank: int | None) -> Iterator[StepRecord]:
    """Scalar summaries of TensorBoard event files (``events.out.tfevents.*``), read with the
    ``tensorboard`` package's event-file loader (no TensorFlow), one event at a time. Scalars of one
    step (tags mapped as in :mod:`datacheck.trace.readers.fields`, e.g. ``train/loss``,
    ``TrainIterStats/loss``, ``lr-AdamW/pg1``) become one record, and an eval loss logged at the same
    step (``eval/loss``, ``EvalStats/avg_loss``) a second, eval record. Event files written by a
    Lightning Trainer's ``TensorBoardLogger`` (:func:`lightning_logger_dir`, an ``epoch`` scalar with
    the step's metrics) count steps from 0.

    Several event files are read in the order they were begun (the wall time of each one's first event;
    the path breaks ties). A file begun after every earlier one's last event is a launch of its own: a
    run resumed from a checkpoint (Lightning's logger writes a new event file, in the same ``version_N``
    folder or a new one; a ``SummaryWriter`` opened again logs the steps from the checkpoint's on) or
    restarted into the same folder. The earlier launches' steps are all given before its first, so a
    step it logs again reads as the step going back (a resume, or a restart back at the first step:
    :func:`datacheck.trace.run.trace_logs`), not as one step whose values the two launches overwrite.
    Files written at the same time (two writers of one launch) have their scalars of one step merged.

    Raises:
        OptionalDependencyError: ``tensorboard`` is not installed (the message gives the install command).
    """
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ImportError:
        raise OptionalDependencyError("reading TensorBoard event files needs the tensorboard package: "
                                      'pip install "tensorboard>=2.14" (the datacheck "trace" extra)') from None
    pending: dict[int, dict[str, Any]] = {}
    lightning = bool(files) and all(lightning_logger_dir(p, "tensorboard") for p in files)

    def flush(keep: int) -> Iterator[StepRecord]:
        while len(pending) > keep:
            step = min(pending)
            vals = pending.pop(step)
            try:
                rec = record_from_mapping({**vals, "step": step}, source, None, rank)
            except BadValue as exc:
                stats.bad(step, f"step {step}: {exc}")
                continue
            if rec is not None:
                if (conv := keyed_convention(vals)) is not None:
                    stats.knows(*conv)
                elif lightning and "epoch" in vals:  # the Trainer's logger: epoch logged with every step
                    stats.knows(0, LIGHTNING_LAYOUT_WHY)
                yield rec
                ev = eval_record_beside(vals, rec)  # an eval value logged at a training step is kept
                if ev is not None:
                    yield ev

    ended: float | None = None  # the last wall time of the files read so far
    for path in sorted(files, key=lambda p: (_tb_begun(p, EventFileLoader), str(p))):
        begun = _tb_begun(path, EventFileLoader)
        if ended is not None and begun >= ended:
            yield from flush(0)  # a launch of its own: the steps before it are all given first
        read = 0
        try:
            for ev in EventFileLoader(str(path)).Load():
                stats.lines += 1
                read += 1
                if ev.wall_time and (ended is None or ev.wall_time > ended):
                    ended = float(ev.wall_time)
                if not ev.HasField("summary"):
                    continue
                for v in ev.summary.value:
                    x = _tb_value(v)
                    if x is None:
                        continue
                    slot = pending.setdefault(int(ev.step), {"_timestamp": ev.wall_time})
                    slot[v.tag] = x
                yield from flush(_TB_PENDING)
        except Exception as exc:  # noqa: BLE001 - a corrupt or cut event file: counted, what was read is kept
            stats.bad(stats.lines + 1, f"{path.name}: event file unreadable after {stats.lines} events "
                                       f"({type(exc).__name__}: {str(exc)[:80]})")
            continue
        frames, end, size = _tfrecord_frames(path)
        if read < frames or end != size:
            # tensorboard's loader stops quietly at a record whose checksum fails or that is cut (it
            # waits for a live file to grow): the events after it are lost, which is said
            stats.bad(stats.lines + 1, (
                f"{path.name}: read stopped at event {read + 1} of {frames}: it fails its checksum; the events "
                "after it are not read" if read < frames else
                f"{path.name}: read stopped after {read} event(s), at byte {end} of {size}: the next record is cut "
                "short or its length corrupt; the rest is not read"))
    yield from flush(0)


def _tfrecord_frames(path: Path) -> tuple[int, int, int]:
    """(complete TFRecord frames, the byte where they end, the file size) of an event file, walked by
    its framing alone (``uint64`` length, ``uint32`` length checksum, data, ``uint32`` data checksum;
    checksums not verified): where a reader that stopped early should have gone on."""
    frames = end = 0
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        while end + 12 <= size:
            f.seek(end)
            n = int.from_bytes(f.read(8), "little")
            if end + 16 + n > size:
                break
            end += 16 + n
            frames += 1
    return frames, end, size

