"""Hugging Face ``trainer_state.json``, streamed: its ``log_history`` entries one at a time.

The Trainer rewrites ``trainer_state.json`` at every checkpoint (``TrainerState.save_to_json``:
``json.dumps(asdict(state), indent=2, sort_keys=True)``); a long run logging every step makes it
hundreds of MB, and a copy cut mid-write is common. The document is read with ``ijson`` (an
incremental JSON parser; its ``yajl2_c`` C backend when built, else its pure-Python one), so memory
is one read buffer plus one entry, and a cut file gives the entries read before the cut.

Two things the standard parser accepts and ``ijson`` does not are handled here:

- Python's ``json`` writes non-finite floats as the bare tokens ``NaN``, ``Infinity``, ``-Infinity``
  (a ``grad_norm`` of NaN is the very case ``trace`` is for). :class:`NanQuotingReader` rewrites
  those tokens outside strings into the JSON strings ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``,
  which :func:`~datacheck.trace.readers.fields.to_float` reads back as ``nan`` / ``inf`` / ``-inf``.
- A string longer than :data:`_MAX_STRING` bytes is passed on cut (its middle left out), since
  ``yajl`` takes time quadratic in a string's length.
- The bounds of :mod:`datacheck.io.safejson` hold per entry: nesting deeper than
  :data:`~datacheck.io.safejson.MAX_JSON_DEPTH` levels stops the read (``yajl`` keeps its own stack,
  so the deep document is never built); an integer too large for ``yajl`` (over 64 bits) or for
  Python's digit limit stops it too. Either way the entries before it are kept and the stop is
  reported where it happened.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Any, Iterator

from datacheck.io.safejson import MAX_JSON_DEPTH
from datacheck.model.errors import OptionalDependencyError, UsageError
from datacheck.trace.readers.fields import BadValue
from datacheck.trace.readers.keyed import record_from_mapping
from datacheck.trace.record import ReadStats, StepRecord

__all__ = ["NanQuotingReader", "read_hf_state", "ijson_backend", "HF_STATE_WHY"]

#: the step count of a ``trainer_state.json`` (what marks a log as the Hugging Face Trainer's)
HF_STATE_WHY = "Hugging Face trainer_state.json: global_step counted after the update, from 1"

_READ = 1 << 20  # bytes read from the file at a time
#: keys of the Trainer's final ``log_history`` entry (``TrainOutput.metrics``: ``train_runtime``,
#: ``total_flos``, ``train_loss`` = the mean loss of the whole run): it is no step and is never read as one
_SUMMARY_KEYS = frozenset(("train_runtime", "total_flos", "train_samples_per_second", "train_steps_per_second"))
#: the longest string passed to the parser (bytes): ``yajl`` through ``ijson`` takes time quadratic in
#: a string's length (a 16 MiB string: 3 s; 1 GiB: hours), and no value of a trainer_state.json is
#: near this; the middle of a longer string is left out (the document stays valid JSON)
_MAX_STRING = 1 << 20
_HOLD = len(b"-Infinity") - 1  # bytes held back at a chunk's end: a token may continue in the next chunk
_OUTSIDE = re.compile(rb'"|-?Infinity|NaN')  # what matters outside a string: a string start, a bare token
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's characters up to its closing quote


class NanQuotingReader:
    """A binary file wrapper whose :meth:`read` returns the file's bytes with the bare tokens ``NaN``,
    ``Infinity`` and ``-Infinity`` outside JSON strings turned into quoted strings (``"NaN"`` ...).

    Strings (with ``\\"`` and ``\\\\`` escapes) are followed across reads, so a token inside a string
    (a run name ``"NaN-sweep"``) is left as it is. A chunk that holds no token and no backslash is
    passed through after counting its quotes (C-speed ``bytes`` methods); otherwise it is walked
    string by string. ``consumed`` is the count of file bytes read so far (for messages); ``chunk``
    the bytes read from ``raw`` at a time.
    """

    def __init__(self, raw: IO[bytes], chunk: int = _READ):
        self._raw = raw
        self._chunk = chunk
        self._carry = b""
        self._in_string = False
        self._eof = False
        self._ready = b""
        self._at = 0  # bytes of _ready already returned
        self.consumed = 0
        self._run = 0  # bytes of the current string passed on whole buffers so far
        #: strings cut at _MAX_STRING bytes (their middle left out)
        self.cut_strings = 0

    def _long_string(self, n: int) -> bool:
        """Count ``n`` bytes of a string that fills a whole buffer; True once the string is past
        :data:`_MAX_STRING` (the caller leaves these bytes out)."""
        self._run += n
        if self._run > _MAX_STRING:
            if self._run - n <= _MAX_STRING:
                self.cut_strings += 1
            return True
        return False

    def read(self, n: int = -1) -> bytes:
        """Up to ``n`` converted bytes (all that is ready when ``n`` < 0); ``b""`` at the end."""
        if n == 0:
            return b""  # ijson probes the file's type with read(0)
        while self._at >= len(self._ready):
            if self._eof and not self._carry:
                return b""
            chunk = self._raw.read(self._chunk) if not self._eof else b""
            if not chunk:
                self._eof = True
            self.consumed += len(chunk)
            self._ready, self._at = self._convert(self._carry + chunk), 0
        end = len(self._ready) if n < 0 else min(len(self._ready), self._at + n)
        out = self._ready[self._at:end]  # one copy of what is returned; the rest stays in place
        self._at = end
        return out

    def _convert(self, buf: bytes) -> bytes:
        end = len(buf) if self._eof else max(0, len(buf) - _HOLD)
        if b"\\" not in buf and b"NaN" not in buf and b"Infinity" not in buf:
            self._carry = buf[end:]
            quotes = buf.count(b'"', 0, end)
            if not quotes and self._in_string and self._long_string(end):
                return b""  # the middle of a string over _MAX_STRING: left out
            if quotes:
                self._run = 0
            if quotes & 1:
                self._in_string = not self._in_string
            return buf[:end]
        out: list[bytes] = []
        pos = 0
        while pos < end:
            if self._in_string:
                body = _STRING_BODY.match(buf, pos)
                stop = body.end() if body else pos
                if stop < len(buf) and buf[stop:stop + 1] == b'"':
                    out.append(buf[pos:stop + 1])
                    pos = stop + 1
                    self._in_string = False
                    continue
                # the string runs past the buffer; a trailing backslash (escape) waits for the next byte
                keep = stop if stop < len(buf) and buf[stop:stop + 1] == b"\\" and not self._eof else len(buf)
                keep = max(keep, pos)
                if pos == 0 and self._long_string(keep):
                    self._carry = buf[keep:]
                    return b""  # the middle of a string over _MAX_STRING: left out
                out.append(buf[pos:keep])
                self._carry = buf[keep:]
                return b"".join(out)
            m = _OUTSIDE.search(buf, pos)
            if m is None or m.start() >= end:  # the held-back tail may hold the start of a token
                out.append(buf[pos:end])
                pos = end
                break
            out.append(buf[pos:m.start()])
            tok = m.group()
            if tok == b'"':
                out.append(tok)
                self._in_string = True
            else:
                out.append(b'"' + tok + b'"')
            pos = m.end()
        self._carry = buf[pos:]
        return b"".join(out)


def ijson_backend() -> Any:
    """The ``ijson`` module's fastest available backend (``yajl2_c`` when its C extension is built,
    else the pure-Python ``python`` backend).

    Raises:
        OptionalDependencyError: ``ijson`` is not installed (the message gives the install command).
    """
    try:
        import ijson
    except ImportError:
        raise OptionalDependencyError("reading trainer_state.json needs the ijson package: "
                                      'pip install "ijson>=3.2" (the datacheck "trace" extra)') from None
    return ijson


def read_hf_state(path: Path, source: str, stats: ReadStats, rank: int | None) -> Iterator[StepRecord]:
    """Hugging Face ``trainer_state.json``: its ``log_history`` entries (``loss``, ``grad_norm``,
    ``learning_rate``, ``epoch``, ``step``; eval entries ``eval_loss``), streamed. Notes ``hf_nan_filter``
    (the Trainer's ``logging_nan_inf_filter``, on by default, drops non-finite losses from the logged
    average) and ``logging_steps=N`` (the logging interval; ``sort_keys`` puts it after ``log_history``,
    so it is noted when the read reaches it). The final summary entry (``train_runtime``,
    ``total_flos``, ``train_loss`` = the run's mean) is skipped and noted ``hf_summary_entry``.

    ``stats.lines`` counts ``log_history`` entries. An entry that is not an object, or whose metric is
    not a number, is counted as unparsed. A document cut mid-write, a syntax error, nesting deeper than
    :data:`~datacheck.io.safejson.MAX_JSON_DEPTH` or an over-long integer stops the read: the entries
    before it are kept, and ``stats.stopped`` says where (entry index and byte offset) and why.

    Raises:
        UsageError: the document is not a JSON object, or ends without a ``log_history`` list
            (not a trainer_state.json: force another reader with ``--format``).
        OptionalDependencyError: ``ijson`` is not installed.
    """
    ijson = ijson_backend()
    stats.notes.add("hf_nan_filter")
    stats.knows(1, HF_STATE_WHY)
    depth = 0  # nesting level after the current event (the document's object is 1, log_history 2)
    top_key: str | None = None
    hist_seen = False
    entry: dict[str, Any] | None = None
    entry_key: str | None = None
    index = -1  # the log_history index being read
    done = 0  # entries read completely
    skip = 0  # > 0: inside a nested value (or a list entry) that started at this depth
    with open(path, "rb") as f:
        rd = NanQuotingReader(f)
        try:
            for prefix, event, value in ijson.parse(rd, use_float=True):
                if event == "start_map" or event == "start_array":
                    depth += 1
                    if depth > MAX_JSON_DEPTH:
                        raise _Stop(f"JSON nested more than {MAX_JSON_DEPTH} levels deep "
                                    f"(datacheck reads at most {MAX_JSON_DEPTH})")
                elif event == "end_map" or event == "end_array":
                    depth -= 1
                if prefix == "":
                    if event == "map_key":
                        top_key = value
                    elif event not in ("start_map", "end_map"):
                        raise UsageError(f"{source}: a JSON {event.replace('start_', '')}, not an object with "
                                         "'log_history': not a Hugging Face trainer_state.json (force another "
                                         "reader with --format)")
                    continue
                if top_key == "logging_steps":
                    if prefix == "logging_steps" and event == "number" and value == value:
                        stats.notes.add(f"logging_steps={int(value)}")
                    continue
                if top_key != "log_history":
                    continue
                if prefix == "log_history":
                    if event == "start_array":
                        hist_seen = True
                    elif event != "end_array":
                        raise UsageError(f"{source}: 'log_history' is a {event}, not a list: not a Hugging Face "
                                         "trainer_state.json (force another reader with --format)")
                    continue
                if skip:
                    if depth < skip:  # the nested value (or list entry) ended
                        skip = 0
                        if entry is None:
                            done += 1
                    continue
                if entry is None:  # an entry starts
                    index += 1
                    stats.lines = index + 1
                    if event == "start_map":
                        entry, entry_key = {}, None
                        continue
                    stats.bad(index + 1, f"log_history[{index}] is a {event.replace('start_', '')}, not an object")
                    if event == "start_array":
                        skip = depth
                    else:
                        done += 1
                    continue
                if event == "end_map":  # the entry is complete
                    got, entry = entry, None
                    done += 1
                    if "datacheck_index_hash" in got and "datacheck_config_hash" in got:  # DatacheckCallback's entry
                        stats.identity = (str(got["datacheck_index_hash"]), str(got["datacheck_config_hash"]))
                    if _SUMMARY_KEYS & got.keys():  # the run's summary: train_loss is the run's mean, no step's
                        stats.notes.add("hf_summary_entry")
                        continue
                    try:
                        rec = record_from_mapping(got, source, None, rank)
                    except BadValue as exc:
                        stats.bad(index + 1, f"log_history[{index}]: {exc}")
                        continue
                    if rec is not None:
                        yield rec
                elif event == "map_key":
                    entry_key = value
                elif entry_key is not None:
                    if event == "start_map" or event == "start_array":  # a nested value: not a metric
                        skip = depth
                        entry[entry_key] = {"nested": event.replace("start_", "")}
                    else:
                        entry[entry_key] = value
        except _Stop as exc:
            _stopped(stats, index, done, rd, str(exc))
            return
        except (ijson.JSONError, ValueError, UnicodeDecodeError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if "premature EOF" in reason or "Incomplete JSON" in reason:
                reason = "the file ends mid-document (cut mid-write?)"
            if not hist_seen:
                raise UsageError(f"{source}: not a readable trainer_state.json ({reason}) before any log_history "
                                 "entry; a copy cut mid-write? give the checkpoint's previous copy or the console "
                                 "log (--format text)") from None
            _stopped(stats, index, done, rd, reason)
            return
    if not hist_seen:
        raise UsageError(f"{source}: no 'log_history' list: not a Hugging Face trainer_state.json "
                         "(force another reader with --format)")


class _Stop(Exception):
    """The read stops here (a bound of :mod:`datacheck.io.safejson` was passed)."""


def _stopped(stats: ReadStats, index: int, done: int, rd: NanQuotingReader, reason: str) -> None:
    where = f"in log_history[{index}]" if index >= done else f"after log_history[{done - 1}]" if done else \
        "at the start of log_history"
    stats.stopped = (f"read stopped {where} (file bytes read: {rd.consumed}): {reason}; the {done} complete "
                     f"entr{'y' if done == 1 else 'ies'} before it are traced")
    stats.bad(index + 1 if index >= 0 else 1, stats.stopped)
