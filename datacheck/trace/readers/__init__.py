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
``hf_console`` Hugging Face Trainer dict lines only
``key_value``  ``key value`` / ``key: value`` / ``key=value`` lines only (nanoGPT, mlx-lm, mmengine, ...)
``regex``      a user regex with named groups (``--regex``)
============== =====================================================================================

Sniffing (``auto``): a name with ``tfevents`` or a folder -> tensorboard; ``.csv``/``.tsv`` -> csv;
a JSON document whose first 64 KiB mention ``"log_history"`` -> hf_state; ``.jsonl``/``.ndjson`` or a
first non-blank line starting with ``{"`` -> jsonl; anything else -> text. Per-rank logs: a ``rankN``
in the file name gives the rank of records that carry none.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from datacheck.io.bounded import special_kind
from datacheck.model.errors import UsageError
from datacheck.model.identity import IDENTITY_PREFIX, parse_identity
from datacheck.trace.readers import deepspeed, keyvalue, megatron, pydict
from datacheck.trace.readers.fields import MAX_RANK, RANK_IN_NAME, BadValue, bounded_int
from datacheck.trace.readers.files import iter_lines, read_csv, read_jsonl, read_tensorboard
from datacheck.trace.readers.hfstate import read_hf_state
from datacheck.trace.readers.keyed import record_from_mapping
from datacheck.trace.record import ReadStats, StepRecord

__all__ = ["FORMATS", "LINE_FORMATS", "LogFile", "sniff", "open_log"]

#: line formats of the ``text`` reader, tried in this order on every line
LINE_FORMATS: dict[str, Callable[[str], dict[str, Any] | None]] = {
    megatron.NAME: megatron.parse_line,
    deepspeed.NAME: deepspeed.parse_line,
    pydict.NAME: pydict.parse_line,
    keyvalue.NAME: keyvalue.parse_line,
}
FORMATS = ("auto", "hf_state", "jsonl", "csv", "tensorboard", "text", *LINE_FORMATS, "regex")
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
        stats: filled while :meth:`records` is iterated.
    """

    path: Path
    source: str
    format: str
    rank: int | None = None
    regex: re.Pattern[str] | None = None
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
        else:
            parsers = {self.format: LINE_FORMATS[self.format]}
        last: dict[int | None, int] = {}
        tqdm_step: int | None = None
        st = self.stats
        order = list(parsers.items())  # priority order (a Megatron line would parse as key_value too);
        # each parser rejects a line that is not its own by a substring test before any regex
        tqdm = deepspeed.TQDM
        for n, text in iter_lines(self.path, st):
            if not text or text.isspace():
                continue
            if IDENTITY_PREFIX in text:
                ident = parse_identity(text)
                if ident:
                    st.identity = ident
                    continue
            for name, parse in order:
                try:
                    got = parse(text)
                except BadValue as exc:
                    st.bad(n, f"{text[:120]} ({exc})")
                    break
                if got is None:
                    continue
                rec = self._record(name, got, n, last, tqdm_step)
                if rec is None:
                    st.bad(n, f"{text[:120]} (no metric)")
                    break
                st.line_formats[name] = st.line_formats.get(name, 0) + 1
                if rec.split == "train":
                    last[rec.rank] = rec.step
                yield rec
                break
            if "<" in text:  # a tqdm bar's "n/total [elapsed<remaining"
                t = tqdm.search(text)
                if t:
                    tqdm_step = int(t.group(1))

    def _record(self, name: str, got: dict[str, Any], n: int, last: dict[int | None, int],
                tqdm_step: int | None) -> StepRecord | None:
        rank = got.pop("rank", None)
        try:
            rank = bounded_int(int(rank), "rank", "rank") if rank is not None else self.rank
        except (BadValue, ValueError, OverflowError):
            return None
        prev = last.get(rank)
        if name == pydict.NAME:
            step = tqdm_step if tqdm_step is not None and (prev is None or tqdm_step >= prev) else None
            fallback = step if step is not None else (0 if prev is None else prev + 1)
            try:
                rec = record_from_mapping(got, self.source, n, rank, fallback_step=fallback)
            except BadValue:
                return None
            if rec is not None and step is not None:
                rec.step_inferred = False
            return rec
        inferred = "step" not in got
        if inferred:
            got["step"] = 0 if prev is None else prev + 1
        split = got.pop("split", "train")
        got.pop("eval", None)
        return StepRecord(source=self.source, line=n, rank=rank, split=split, step_inferred=inferred, **got)


def open_log(path: str, fmt: str = "auto", regex: str | None = None) -> LogFile:
    """A :class:`LogFile` for ``path`` (format sniffed unless ``fmt`` forces one).

    Raises:
        UsageError: the path does not exist, the format is unknown, ``--regex`` does not compile or
            has no ``step`` group, or ``regex`` is given with a non-line format.
    """
    p = Path(path)
    if not p.exists():
        raise UsageError(f"log {path!r} does not exist")
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
    return LogFile(path=p, source=path, format=chosen, rank=rank, regex=rx)
