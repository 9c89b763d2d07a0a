"""The recorded batch order: a compact per-rank ledger of step -> global row indices.

Layout (OLMo's ``data-indices/rank{r}.tsv.gz`` is the precedent): one gzip'd TSV per rank,
``<dir>/data-indices/rank{r}.tsv.gz``. datacheck's own files start with a header line and carry
state lines; every other line is one micro-batch::

    #datacheck-ledger<TAB>1
    #state<TAB>{"epoch": 0, "start_step": 0, "sampler": "DistributedSampler", "seed": 0, ...}
    <step><TAB><rank><TAB><micro_batch><TAB><epoch><TAB><index><TAB><index>...

A ``#state`` line is written each time the recorded sampler starts an epoch (or a resumed run
starts): the epoch, the step the next batch belongs to (``start_step``), ``grad_accum``, the
micro-batches the epoch's iteration yields (``batches``, when the sampler has a length) and the
sampler's settings; ``"epoch_steps": "own"`` when each rank counts its own steps over its own epochs
(the Hugging Face Trainer's numbering, and accelerate's ``even_batches=False`` loop's: a rank given fewer
micro-batches an epoch starts its next epoch at an earlier step than another; absent, in a ledger of an
older datacheck: every rank's epoch starts after the longest share's steps). Under a torch ``RandomSampler``
(``DataLoader(shuffle=True)``), what its permutation of the iteration comes from, read before it draws:
``sampler_seed`` (an int below ``2**63``: without a generator, the seed it draws from the global torch RNG
and seeds its own generator with) or ``sampler_generator_state`` (a str: with a generator, which it draws
from directly, the generator's ``get_state()`` bytes, zlib-compressed, base64); absent in a ledger of an
older datacheck (and for any other sampler). Readers ignore keys they do not know. An ``#end`` line is written when an epoch's iteration ran to its end (every batch
received by the training loop): the epoch, the micro-batches it yielded on the rank (``batches``, what was
observed, also for a sampler without a length), the most any rank got (``epoch_batches``: accelerate's
``even_batches=False`` gives some processes fewer) and ``next_step``, where the next epoch starts; ``replayed``
(when not 0): how many of those micro-batches a resumed loop received again and skipped, trained before the
resume (``record_batches(..., resume_skips=True)``), not recorded.
Records of steps at or after a ``#state`` line's ``start_step`` that were written before it are
superseded (a run resumed from an earlier checkpoint re-records those steps), and so are the ``#state``
lines (and their ``#end`` lines) written before it with a later ``start_step`` (or the same one, when it
carries nothing), except the last
``carried`` records of ``start_step`` when the ``#state`` line has ``"carried": k`` (k > 0): the Hugging
Face Trainer does not zero the gradients between epochs, so the micro-batches an epoch that shrank trains
after its last update (written at the step the next epoch starts at, before its ``#state`` line) go into
the next epoch's first update. That step then holds k + ``grad_accum`` micro-batches: the carried ones
(micro-batches 0 .. k-1, their own epoch) then the new epoch's (k .. k + grad_accum - 1). Ledgers without
the key read as before.

An ``#untrained`` line (``{"step": s, "rank": r, "micro_batches": k}``) says the ``k`` micro-batches recorded
at step ``s`` before it were run forward and backward, but no optimizer update ever took them: the training
ended first (the Hugging Face Trainer's shrunk last epoch, whose micro-batches after its last update wait for
an update of a next epoch that never comes; a stop between a step's micro-batches). They are not the step's
batches: :attr:`Ledger.untrained` holds them (a later ``#state`` line at or before ``s`` supersedes them as
it does any record).

An ``#in_flight`` line (``{"rank": r, "batches": [{"step", "micro_batch", "epoch", "indices"}, ...]}``) names the
micro-batches a training loop that reports what it trained (the Hugging Face callback) had received and
not trained to the end when its process stopped without saying the training ended (an exception out of
``Trainer.train()``, such as an embedding's ``IndexError``): the first is the one it was training, the
others were fetched ahead. They are no step's batches: :attr:`Ledger.in_flight` holds them (a later
``#state`` line at or before their step supersedes them as it does any record).

OLMo's files (no header) hold ``<step><TAB><index>...`` per rank and step (all micro-batches of the
device batch on one line; the step is OLMo's ``global_step``, 1-based). They are read as they are:
``micro_batch`` and ``epoch`` are None, step numbers are the file's own (indices separated by commas
are accepted too, as some exports write them). Plain ``rank{r}.tsv`` files are read like the gzip'd ones.

This module needs neither torch nor any datacheck layer above ``model``: ``datacheck plan --ledger``
and ``datacheck trace --ledger`` both read ledgers through :func:`read_ledger`, with or without torch.

Indices are global row indices of the dataset (see :mod:`datacheck.execute.plan` for what they map to).
They are read as :class:`Indices`, read-only ``int64`` arrays (8 bytes an index: a tuple of Python ints
costs about 36, 9 GB for a 500,000-step run of global batch 512); every number of a line is ASCII
digits below ``2**63`` (an edited ``1_0`` or Arabic-Indic digits are not a ledger line).
"""
from __future__ import annotations

import gzip
import itertools
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, overload

import numpy as np

from datacheck.io import safejson
from datacheck.io.bounded import NotRegular, open_regular
from datacheck.model.errors import UsageError

__all__ = ["LEDGER_HEADER", "LEDGER_VERSION", "Indices", "LedgerBatch", "Ledger", "read_ledger", "step_indices", "ledger_files",
           "rank_file", "tear_label"]

LEDGER_VERSION = 1
LEDGER_HEADER = f"#datacheck-ledger\t{LEDGER_VERSION}"
_RANK_FILE = re.compile(r"^rank(\d+)\.tsv(\.gz)?$")


class Indices(Sequence[int]):
    """A batch's global row indices, held as one read-only ``int64`` numpy array (8 bytes an index;
    a tuple of Python ints costs about 36): a long run's ledger (500,000 steps x 512 rows is 256 M
    indices) is read in about 2 GiB, not 9 GiB. It behaves as the tuple of ints it replaces: items and
    iteration are Python ints, slices are ``Indices``, it equals (and hashes like) the tuple or list
    of the same ints, and ``np.asarray`` gives the array itself (no copy).

    Args:
        values: the indices (each in ``0 .. 2**63 - 1``); an ``int64`` array is kept as it is.
    """

    __slots__ = ("array",)

    def __init__(self, values: Any = ()) -> None:
        a = values if isinstance(values, np.ndarray) and values.dtype == np.int64 else np.asarray(values, dtype=np.int64)
        if a.ndim != 1:
            a = a.reshape(-1)
        a.flags.writeable = False
        #: the indices, a read-only 1-D ``int64`` array
        self.array: np.ndarray = a

    def __len__(self) -> int:
        return int(self.array.shape[0])

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> Indices: ...

    def __getitem__(self, i: int | slice) -> int | Indices:
        if isinstance(i, slice):
            return Indices(self.array[i])
        return int(self.array[i])

    def __iter__(self) -> Iterator[int]:
        return iter(self.array.tolist())

    def __contains__(self, x: object) -> bool:
        try:
            return bool((self.array == x).any()) if isinstance(x, (int, np.integer)) else x in self.array.tolist()
        except (TypeError, OverflowError):
            return False

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Indices):
            return bool(np.array_equal(self.array, other.array))
        if isinstance(other, (tuple, list)):
            return len(other) == len(self) and self.array.tolist() == list(other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(tuple(self.array.tolist()))

    def __repr__(self) -> str:
        return repr(tuple(self.array.tolist()))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if dtype is not None and np.dtype(dtype) != self.array.dtype:
            return self.array.astype(dtype)
        return self.array.copy() if copy else self.array

    def tolist(self) -> list[int]:
        """The indices as a list of Python ints."""
        return self.array.tolist()


@dataclass(frozen=True, slots=True)
class LedgerBatch:
    """One recorded micro-batch (datacheck ledger) or device batch (OLMo ledger).

    Attributes:
        step: the optimizer step, as numbered in the file.
        rank: the data-parallel rank.
        micro_batch: index within the step (0 .. grad_accum-1; up to grad_accum + carried - 1 at a step
            a ``#state`` line's ``carried`` micro-batches go into), None for OLMo files.
        epoch: the sampler epoch, None for OLMo files.
        indices: global row indices, in batch order (:class:`Indices`: a read-only ``int64`` array
            that reads, compares and hashes as the tuple of ints).
    """

    step: int
    rank: int
    micro_batch: int | None
    epoch: int | None
    indices: Indices


@dataclass
class Ledger:
    """Every rank's recorded batches.

    Attributes:
        folder: the folder holding the ``rank{r}.tsv.gz`` files.
        format: ``"datacheck"`` or ``"olmo"``.
        batches: rank -> step -> the step's batches on that rank, in order.
        states: rank -> the ``#state`` records (dicts), in file order, less those a later ``#state``
            line superseded (a ``start_step`` after the later one's: what an earlier run began there).
        truncated: files whose gzip stream ends early (a run killed mid-write) or whose last line has
            no newline: every complete line before the tear is read (the cut gzip member's too: a
            deflate stream inflates exactly up to where it was cut), the cut line dropped.
        tears: file -> where it tears, in words: the byte offset of the cut (the end of the file),
            the gzip member it cuts and the complete lines read (:attr:`_Lines.tear`).
        empty: files holding no complete line (0 bytes, an empty gzip stream, or one whose only
            gzip member was cut): their rank is in ``batches`` with no step, and they decide no format.
        partial: rank -> ``(step, micro-batches recorded, micro-batches the step has)`` of a rank's last
            recorded step when it holds fewer micro-batches than it should: ``grad_accum``, or for the
            last step of an epoch the remainder of the epoch's ``batches`` (the run stopped mid-step,
            or lost the step's last lines); datacheck ledgers with ``#state`` lines only.
        ends: rank -> the ``#end`` records, in file order, each as ``(states before it, the record)``: an
            iteration that ran to its epoch's end (the record's ``epoch``, ``batches``, ``epoch_batches``,
            ``next_step``); the iteration the last ``#state`` began ended when the last entry's count is
            ``len(states[rank])``.
        untrained: rank -> step -> the micro-batches an ``#untrained`` line says no optimizer update took
            (run forward and backward, then the training ended); they are not in ``batches``.
        in_flight: rank -> step -> the micro-batches an ``#in_flight`` line names (received by the training
            loop and not trained to the end when its process stopped; the first was being trained), in
            their order; they are not in ``batches``.
        restarts: rank -> each ``#state`` line that started the run over: its ``start_step`` is at or before
            the first ``start_step`` of the rank's ledger while steps were recorded before it (a new run
            recorded into the folder of an earlier one: ``record_batches`` starts it at that step), as a dict:
            ``line`` (1-based), ``start_step``, ``superseded`` (the steps recorded before it, each rank's own),
            ``first`` and ``last`` of those steps.
    """

    folder: Path
    format: str
    batches: dict[int, dict[int, list[LedgerBatch]]] = field(default_factory=dict)
    states: dict[int, list[dict]] = field(default_factory=dict)
    truncated: list[str] = field(default_factory=list)
    tears: dict[str, str] = field(default_factory=dict)
    empty: list[str] = field(default_factory=list)
    partial: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    ends: dict[int, list[tuple[int, dict]]] = field(default_factory=dict)
    untrained: dict[int, dict[int, list[LedgerBatch]]] = field(default_factory=dict)
    restarts: dict[int, list[dict]] = field(default_factory=dict)
    in_flight: dict[int, dict[int, list[LedgerBatch]]] = field(default_factory=dict)

    @property
    def ranks(self) -> list[int]:
        return sorted(self.batches)

    @property
    def world_ranks(self) -> list[int]:
        """Every rank the run had: those with a ledger file, and ``0 .. num_replicas - 1`` of the
        largest ``num_replicas`` a ``#state`` line records (a rank whose file is absent included)."""
        ws = max((st["num_replicas"] for sts in self.states.values() for st in sts
                  if isinstance(st.get("num_replicas"), int) and 0 < st["num_replicas"] <= 1 << 20), default=0)
        return sorted(set(self.batches) | set(range(ws)))

    @property
    def steps(self) -> list[int]:
        """Every recorded step (any rank), ascending."""
        return sorted({s for per in self.batches.values() for s in per})

    def step(self, step: int) -> list[LedgerBatch]:
        """The batches of ``step`` on every rank (rank order, then micro-batch order).

        Raises:
            UsageError: no rank recorded that step (the message gives the recorded range).
        """
        out = [b for r in self.ranks for b in self.batches[r].get(step, [])]
        if not out:
            steps = self.steps
            span = f"{steps[0]}..{steps[-1]}" if steps else "none"
            raise UsageError(f"--step {step}: not in the ledger {self.folder} (recorded steps: {span})")
        return out

    def last(self, rank: int) -> LedgerBatch | None:
        """The last recorded batch of ``rank`` (highest step, last micro-batch), or None."""
        per = self.batches.get(rank)
        if not per:
            return None
        return per[max(per)][-1]


def ledger_files(folder: str | Path, what: str = "--ledger") -> dict[int, Path]:
    """rank -> ledger file under ``folder`` (or ``folder/data-indices``).

    Args:
        folder: the ledger folder.
        what: how the command line named it, for the error (``--ledger``, or ``RUN`` for a positional).

    Raises:
        UsageError: the folder does not exist or holds no ``rank{r}.tsv.gz`` file.
    """
    base = Path(folder)
    if not base.is_dir():
        raise UsageError(f"{what} {folder}: not a folder (pass the folder given to record_batches, "
                         "or an OLMo save folder holding data-indices/)")
    for cand in (base / "data-indices", base):
        found = {int(m.group(1)): p for p in cand.glob("rank*.tsv*") if (m := _RANK_FILE.match(p.name))}
        if found:
            return dict(sorted(found.items()))
    raise UsageError(f"{what} {folder}: no rank<r>.tsv.gz file in it or in its data-indices/ folder")


def rank_file(folder: str | Path, rank: int) -> Path:
    """Where the ledger of ``rank`` lives: ``<folder>/data-indices/rank{rank}.tsv.gz``."""
    return Path(folder) / "data-indices" / f"rank{rank}.tsv.gz"


#: the most bytes a ledger file may inflate to (a 100,000-step run of 64 ranks' micro-batches of
#: 1,024 rows is about 1 GiB a rank); past it the read stops with a usage error naming the file
MAX_LEDGER_BYTES = 4 << 30
#: the longest ledger line (one micro-batch's indices: 16 MiB is two million indices)
MAX_LEDGER_LINE = 16 << 20
_BLOCK = 1 << 22


class _Lines:
    """The complete lines of a ledger file, streamed (see :func:`iter_lines`); ``torn`` is set once
    the iteration has ended on a torn gzip member or a last line without its newline, and ``tear``
    then says where (:attr:`tear`)."""

    def __init__(self, path: Path):
        self.path = path
        self.torn = False
        #: where the file tears, in words (byte offsets of the file as stored), None when it does not
        self.tear: str | None = None
        self._total = 0
        self._plain = False
        self._corrupt = False  # a gzip member that does not inflate (not a cut: its lines are not trusted)
        self._member = 0  # byte offset of the gzip member being inflated
        self._size = 0  # bytes of the file read
        self._file_size = 0  # the file's size (known after a corrupt member)
        self._restart: int | None = None  # a gzip header after a corrupt member: its byte offset

    def _blocks(self, f: Any) -> Iterator[tuple[bytes, bool]]:
        """(inflated bytes, end of a gzip member or of a plain file) in blocks of at most 4 MiB. A
        stream cut mid-member inflates to the cut (deflate decodes a prefix exactly): its bytes are
        yielded and ``torn`` set; a member zlib refuses (corrupt, not cut) sets ``_corrupt``."""
        if f.read(2) != b"\x1f\x8b":
            self._plain = True
            f.seek(0)
            while chunk := f.read(_BLOCK):
                self._size += len(chunk)
                yield chunk, False
            yield b"", True
            return
        f.seek(0)
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        data, fed = b"", False
        while True:
            if not data:
                data = f.read(_BLOCK)
                self._size += len(data)
                if not data:
                    self.torn = self.torn or fed  # a member cut short: its complete lines are kept
                    return
            try:
                out = d.decompress(data, _BLOCK)
            except zlib.error:
                self.torn = self._corrupt = True
                self._after_corrupt(f)
                return
            fed = True
            data = d.unconsumed_tail
            if d.eof:  # the next gzip member (one per append)
                data = d.unused_data + data
                self._member = self._size - len(data)
                d, fed = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            yield out, not fed

    def _after_corrupt(self, f: Any) -> None:
        """Where the bytes left unread after a corrupt member end (the file's size) and the first gzip
        header (``1f 8b 08``) after the member's start, if any: read in blocks, none kept."""
        self._file_size = os.fstat(f.fileno()).st_size
        f.seek(self._member + 1)
        pos, tail = self._member + 1, b""
        while chunk := f.read(_BLOCK):
            k = (tail + chunk).find(b"\x1f\x8b\x08")
            if k >= 0:
                self._restart = pos - len(tail) + k
                return
            pos += len(chunk)
            tail = chunk[-2:]

    def __iter__(self) -> Iterator[tuple[int, str]]:
        path = self.path
        try:
            f = open_regular(path)
        except NotRegular as exc:
            raise UsageError(f"{path}: {exc.reason}; a ledger file is a regular file") from None
        except OSError as exc:
            raise UsageError(f"{path}: cannot read the ledger file ({exc.strerror or exc})") from None
        with f:
            buf = b""
            lineno = 0
            good = 0  # the last complete line read
            held: list[tuple[int, str]] = []  # the lines of the gzip member being read (dropped if corrupt)
            for chunk, member_end in self._blocks(f):
                self._total += len(chunk)
                if self._total > MAX_LEDGER_BYTES:
                    raise UsageError(f"{path}: the ledger inflates past {MAX_LEDGER_BYTES >> 30} GiB: not a ledger "
                                     "datacheck reads (a ledger is one line of indices per micro-batch)")
                if b"\n" in chunk and not chunk.strip(b"\n\r\t "):  # blank lines only: counted, never split
                    if buf.strip():
                        held.append((lineno + 1, buf.decode("utf-8", errors="replace")))
                    lineno += chunk.count(b"\n")
                    buf = chunk[chunk.rfind(b"\n") + 1:]
                else:
                    buf += chunk
                    if b"\n" in chunk:
                        *whole, buf = buf.split(b"\n")
                        for line in whole:
                            lineno += 1
                            if line.strip():
                                held.append((lineno, line.decode("utf-8", errors="replace")))
                if len(buf) > MAX_LEDGER_LINE:
                    raise UsageError(f"{path}: a ledger line over {MAX_LEDGER_LINE >> 20} MiB (after line "
                                     f"{lineno}): not a ledger line")
                if member_end or self._plain:
                    yield from held
                    good = lineno
                    held = []
            if not self._corrupt:
                yield from held
                good = lineno
            cut_line = bool(buf.strip())
            if self.torn or cut_line:
                self._say_tear(good, cut_line, len(buf))

    def _say_tear(self, good: int, cut_line: bool, partial: int) -> None:
        """Set ``torn`` and ``tear``: where the file tears and what was read before it."""
        self.torn = True
        if self._plain:
            at = f"byte {self._size - partial} (a last line of {partial} byte(s) without its newline, dropped)"
        elif self._corrupt:
            self.tear = (f"corrupt at the gzip member from byte {self._member}, which does not inflate (not a cut "
                         f"write): its lines and the {self._file_size - self._member} byte(s) from there to the end "
                         f"of the file (byte {self._file_size}) are not read"
                         + (f", though a gzip member starts again at byte {self._restart} (the file was damaged "
                            "in its middle or written by another tool)" if self._restart is not None else "")
                         + f"; the {good} line(s) before it are read")
            return
        else:
            at = (f"byte {self._size} (the end of the file, inside the gzip member from byte {self._member}"
                  + (": its last line is cut and dropped)" if cut_line else ")"))
        self.tear = f"torn at {at}; the {good} line(s) before it are read"


def tear_label(tear: str) -> str:
    """What a file whose :attr:`_Lines.tear` is ``tear`` is, in words, for the line that names it:
    a torn write (a run killed mid-write: the file's end is cut) or a corrupt file (a gzip member that
    does not inflate: what follows it is not read)."""
    if tear.startswith("corrupt"):
        return "is corrupt, not a torn write"
    return "ends in a torn write (the run was killed mid-write)"


def iter_lines(path: Path) -> _Lines:
    """``(1-based line, text)`` of the complete lines of a (possibly gzip'd, possibly torn) ledger
    file, streamed: read in 4 MiB blocks, each gzip member inflated in blocks, blank stretches
    counted without splitting, at most :data:`MAX_LEDGER_BYTES` inflated and lines of at most
    :data:`MAX_LEDGER_LINE`. Only a regular file is opened. A gzip stream cut mid-member (a single
    stream cut by a crash included) yields every complete line inflated before the cut. ``.torn``
    tells, after the iteration, whether the file tears (a cut gzip member, a corrupt one whose lines
    are dropped, a last line without newline), ``.tear`` where (byte offset) and what was read.

    Raises (while iterated):
        UsageError: not a regular file (a FIFO, ``/dev/zero``), unreadable, or a bound passed.
    """
    return _Lines(path)


def read_lines(path: Path) -> tuple[list[str], bool]:
    """The complete lines of a (possibly gzip'd, possibly torn) ledger file, and whether it was torn
    (:func:`iter_lines`; blank lines left out)."""
    it = iter_lines(path)
    lines = [line for _n, line in it if line.strip()]
    return lines, it.torn


def _int(p: str) -> int:
    """One number of a ledger line: ASCII digits (an optional sign, spaces around), at most 19 of them
    and under ``2**63`` (the reader holds indices as ``int64``). ``int()`` alone would also take ``1_0``
    and other scripts' digits (Arabic-Indic ``١٢``), which no ledger writer emits.

    Raises:
        ValueError: anything else."""
    q = p.strip()
    if len(q) > 20 or not q.isascii() or "_" in q:
        raise ValueError("not ASCII digits")
    v = int(q)
    if v >= 1 << 63:
        raise ValueError("beyond 64 bits")
    return v


def _ints(parts: list[str], path: Path, lineno: int) -> list[int]:
    """The line's numbers: every one a non-negative integer within 63 bits, in ASCII digits (steps,
    ranks, micro-batches, epochs and row indices are all counts from 0; row indices are held as
    ``int64``).

    Raises:
        UsageError: a part that is not such an integer (``1_0`` and non-ASCII digits included; file:line
            named).
    """
    try:
        nums = [_int(p) for p in parts]
    except ValueError:
        raise UsageError(f"{path}:{lineno}: not a ledger line (expected tab-separated integers); "
                         "pass a folder written by record_batches or OLMo's data-indices") from None
    neg = next((v for v in nums if v < 0), None)
    if neg is not None:
        raise UsageError(f"{path}:{lineno}: not a ledger line: {neg} is negative (steps, ranks and row indices "
                         "count from 0); the file was edited or written by another tool")
    return nums


def _read_rank(path: Path, rank: int, led: Ledger, keep: set[int] | None = None) -> None:
    it = iter_lines(path)
    lines = iter(it)
    first = next(((n, line) for n, line in lines if line.strip()), None)
    if first is None:  # no complete line: a rank that recorded nothing, or whose only write was cut
        if it.torn:
            led.truncated.append(str(path))
            led.tears[str(path)] = it.tear or "torn"
        led.empty.append(str(path))
        led.batches[rank], led.states[rank], led.ends[rank] = {}, [], []
        return
    ours = first[1].startswith("#datacheck-ledger")
    if ours:
        version = first[1].split("\t")[1:2]
        if version and version[0].isdigit() and int(version[0]) > LEDGER_VERSION:
            raise UsageError(f"{path}: ledger version {version[0]} is newer than this datacheck reads "
                             f"({LEDGER_VERSION}); upgrade datacheck")
    fmt = "datacheck" if ours else "olmo"
    if led.format and led.format != fmt:
        raise UsageError(f"{path}: mixes ledger formats ({led.format} and {fmt}) in one folder")
    led.format = fmt
    per: dict[int, list[LedgerBatch]] = {}
    counts: dict[int, int] = {}  # step -> micro-batches recorded (every step, also those not kept)
    states: list[dict] = []
    ends: list[tuple[dict | None, dict]] = []  # (the #state of the iteration it ends, the #end record)
    untrained: dict[int, list[LedgerBatch]] = {}  # step -> micro-batches no optimizer update took
    in_flight: dict[int, list[LedgerBatch]] = {}  # step -> micro-batches received, not trained to the end
    restarts: list[dict] = []  # #state lines that start the run over (a new run recorded into the folder)
    restart_at: int | None = None
    for lineno, line in itertools.chain([first], lines):
        if not line.strip():
            continue
        if line.startswith("#"):
            if line.startswith("#state\t"):
                st = _state(line.split("\t", 1)[1], path, lineno)
                start = st.get("start_step")
                if isinstance(start, int) and counts and restart_at is not None and start <= restart_at:
                    restarts.append({"line": lineno, "start_step": start, "superseded": len(counts),
                                     "first": min(counts), "last": max(counts)})
                if isinstance(start, int) and restart_at is None:
                    restart_at = start  # the run's first step: a #state at or before it starts the run over
                if isinstance(start, int):  # a (re)start: later records replace what was recorded from here
                    # but the micro-batches of start_step the epoch before trained with no update after them,
                    # carried into this epoch's first update (``carried``), stay: the step's first ones
                    carried = _carried(st, counts.get(start, 0))
                    kept = per.get(start, [])[len(per.get(start, [])) - carried:] if carried else []
                    for s in [s for s in per if s >= start]:
                        del per[s]
                    for s in [s for s in counts if s >= start]:
                        del counts[s]
                    for s in [s for s in untrained if s >= start]:
                        del untrained[s]
                    for s in [s for s in in_flight if s >= start]:
                        del in_flight[s]
                    if carried:
                        counts[start] = carried
                        if kept:
                            per[start] = kept
                    # and the #state lines of what they replace (a later epoch an earlier run began; one begun at
                    # this very step, unless this line carries that iteration's micro-batches into its step)
                    states = [x for x in states if not (isinstance(x.get("start_step"), int) and (
                        x["start_step"] > start or (x["start_step"] == start and not carried)))]
                states.append(st)
            elif line.startswith("#end\t"):
                ends.append((states[-1] if states else None, _state(line.split("\t", 1)[1], path, lineno)))
            elif line.startswith("#in_flight\t"):
                for b in _in_flight(_state(line.split("\t", 1)[1], path, lineno), rank, path, lineno):
                    in_flight.setdefault(b.step, []).append(b)
            elif line.startswith("#untrained\t"):
                u = _state(line.split("\t", 1)[1], path, lineno).get("step")
                if isinstance(u, int) and not isinstance(u, bool) and u in counts:
                    # the step's micro-batches were trained with no optimizer update after them: not the step's
                    untrained[u] = per.pop(u, [])
                    del counts[u]
            continue
        parts = line.rstrip("\t").split("\t")
        if ours:
            first = _ints(parts[:1], path, lineno)[0]
            counts[first] = counts.get(first, 0) + 1
        if keep is not None and _ints(parts[:1], path, lineno)[0] not in keep:
            continue
        if ours:
            nums = _ints(parts, path, lineno)
            if len(nums) < 4:
                raise UsageError(f"{path}:{lineno}: a ledger line needs step, rank, micro_batch, epoch, indices")
            b = LedgerBatch(step=nums[0], rank=nums[1], micro_batch=nums[2], epoch=nums[3], indices=Indices(nums[4:]))
        else:
            nums = _ints([x for p in parts for x in p.split(",") if x.strip()], path, lineno)
            b = LedgerBatch(step=nums[0], rank=rank, micro_batch=None, epoch=None, indices=Indices(nums[1:]))
            per.pop(b.step, None)  # OLMo: a step written again (a resumed run) replaces the earlier one
        per.setdefault(b.step, []).append(b)
    if it.torn:
        led.truncated.append(str(path))
        led.tears[str(path)] = it.tear or "torn"
    led.batches[rank] = per
    led.states[rank] = states
    led.untrained[rank] = {s: bs for s, bs in untrained.items() if bs}
    if in_flight:
        led.in_flight[rank] = dict(sorted(in_flight.items()))
    if restarts:
        led.restarts[rank] = restarts
    where = {id(st): i + 1 for i, st in enumerate(states)}  # an #end of a superseded iteration is dropped with it
    led.ends[rank] = [(where[id(st)], end) for st, end in ends if st is not None and id(st) in where]
    if ours and counts:
        _note_partial(led, rank, counts, states, led.ends[rank])


def _in_flight(rec: dict, rank: int, path: Path, lineno: int) -> list[LedgerBatch]:
    """The micro-batches of an ``#in_flight`` record (``rec["batches"]``), as :class:`LedgerBatch` of
    ``rank`` (the file's).

    Raises:
        UsageError: a batch is not ``{"step", "micro_batch", "epoch", "indices"}`` of non-negative integers
            (the message names the file and line)."""
    out = []
    for b in rec.get("batches") or []:
        vals = [b.get(k) if isinstance(b, dict) else None for k in ("step", "micro_batch", "epoch")]
        idx = b.get("indices") if isinstance(b, dict) else None
        if (not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals)
                or not isinstance(idx, list)
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 63 for i in idx)):
            raise UsageError(f"{path}:{lineno}: an #in_flight batch needs step, micro_batch, epoch (integers >= 0) "
                             "and indices (a list of integers >= 0)")
        out.append(LedgerBatch(step=vals[0], rank=rank, micro_batch=vals[1], epoch=vals[2], indices=Indices(idx)))
    return out


def _carried(st: dict, recorded: int) -> int:
    """The micro-batches a ``#state`` line says its first step (``start_step``) holds from the iteration
    before (``carried``: 0 when absent, not a positive integer, or more than the step's records written
    before the line, ``recorded``: then nothing is kept, as older ledgers are read)."""
    c = st.get("carried")
    if not isinstance(c, int) or isinstance(c, bool) or c <= 0 or c > recorded:
        return 0
    return c


def _note_partial(led: Ledger, rank: int, counts: dict[int, int], states: list[dict],
                  ends: list[tuple[int, dict]]) -> None:
    """Record in ``led.partial`` a rank's last step when it holds fewer micro-batches than it should
    (``grad_accum``; the epoch's last step, ``start_step + ceil(batches / grad_accum) - 1`` of the
    governing ``#state``, has the remainder ``batches - grad_accum x (steps - 1)``). A last step before
    the ``next_step`` of an ``#end`` written after the last ``#state`` is complete (its epoch ran out)."""
    last = max(counts)
    if ends and ends[-1][0] == len(states) and isinstance(ends[-1][1].get("next_step"), int) \
            and last < ends[-1][1]["next_step"]:
        return
    st = next((x for x in reversed(states) if isinstance(x.get("start_step"), int) and x["start_step"] <= last), None)
    if st is None:
        return
    ga, batches = st.get("grad_accum"), st.get("batches")
    if not isinstance(ga, int):
        return
    want = ga
    carried = st.get("carried")
    if isinstance(carried, int) and not isinstance(carried, bool) and carried > 0 and last == st["start_step"]:
        want += carried  # the step also holds the micro-batches carried into it
    if isinstance(batches, int):
        epoch_last = st["start_step"] + -(-batches // ga) - 1
        if last > epoch_last:
            return  # past the epoch the state describes: nothing to compare with
        if last == epoch_last:  # the epoch's last step takes the remainder micro-batches
            want = batches - ga * (epoch_last - st["start_step"])
    got = counts[last]
    if got >= want:
        return
    led.partial[rank] = (last, got, want)


def _state(text: str, path: Path, lineno: int) -> dict:
    """A ``#state`` line's JSON object (:mod:`datacheck.io.safejson`: depth-bounded), its integer
    fields (``epoch``, ``start_step``, ``seed``, ...) within 64 bits.

    Raises:
        UsageError: not a JSON object, or an integer field beyond 64 bits (file:line named).
    """
    try:
        st = safejson.loads(text)
    except safejson.JsonInputError as exc:
        raise UsageError(f"{path}:{lineno}: bad #state line ({exc.reason})") from None
    if not isinstance(st, dict):
        raise UsageError(f"{path}:{lineno}: bad #state line (a JSON {type(st).__name__}, not an object)")
    for key, v in st.items():
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
            raise UsageError(f"{path}:{lineno}: bad #state line ({key} is beyond a 64-bit integer)")
    return st


def read_ledger(folder: str | Path, steps: Iterable[int] | None = None, *, what: str = "--ledger") -> Ledger:
    """Read every rank's ledger under ``folder`` (datacheck's format or OLMo's ``data-indices``).

    Args:
        folder: the ledger folder (or one holding ``data-indices/``).
        steps: keep only these steps' batches (the rest are parsed for their step number only);
            None: every step.
        what: how the command line named the folder, for the errors (default ``--ledger``).

    Raises:
        UsageError: no ledger file, no file holding a complete line, a line that is not a ledger
            line (file:line named; a negative number, one of 2**63 or more, ``1_0`` and digits
            other than ASCII included), a newer ledger version, or mixed formats.
    """
    files = ledger_files(folder, what)
    led = Ledger(folder=next(iter(files.values())).parent, format="")
    keep = None if steps is None else set(steps)
    for rank, path in files.items():
        _read_rank(path, rank, led, keep)
    if not led.format:
        raise UsageError(f"{what} {folder}: no ledger file holds a complete line ({', '.join(led.empty[:4])}"
                         f"{' ...' if len(led.empty) > 4 else ''}: empty, or cut before the first write ended); "
                         "nothing was recorded")
    return led


def step_indices(led: Ledger) -> dict[int, dict[int, Indices]]:
    """``{step: {rank: global indices}}`` of a ledger: each rank's micro-batches of a step concatenated
    in micro-batch order (the shape ``datacheck trace`` audits), as :class:`Indices` (``int64``; a
    step of one micro-batch shares its batch's array, no copy)."""
    out: dict[int, dict[int, Indices]] = {}
    for rank in led.ranks:
        for step, batches in led.batches[rank].items():
            out.setdefault(step, {})[rank] = (batches[0].indices if len(batches) == 1 else
                                              Indices(np.concatenate([b.indices.array for b in batches])
                                                      if batches else ()))
    return out


def open_append(path: Path) -> gzip.GzipFile:
    """Open ``path`` for appending one new gzip member (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return gzip.open(path, "ab")
