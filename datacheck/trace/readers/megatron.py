"""Megatron-LM / Megatron-DeepSpeed iteration lines (``training.py training_log``)::

     iteration       30/    1000 | consumed samples:          120 | elapsed time per iteration (ms): 1376.1 |
     learning rate: 1.500E-04 | global batch size:     4 | lm loss: 2.247505E+01 | loss scale: 16384.0 |
     grad norm: 16.999 | number of skipped iterations:   1 | number of nan iterations:   0 |

and validation lines (``validation loss at iteration 100 | lm loss value: 7.9 | lm loss PPL: ...``).
Megatron leaves ``lm loss`` out when every iteration of the logging interval was skipped, and averages
only the iterations that were not skipped (``training_log``: ``total_loss_dict``); ``consumed
samples`` is a sample count (kept as ``tokens``, unit samples) and ``global batch size`` the
iteration's global batch (``global_batch``; a batch-size ramp-up grows it). A line cut at its end (a log truncated
mid-write) keeps the fields before the cut; a line a terminal wrapped onto the next (which ends with the
closing ``|``) is joined by the text reader. A line holding a field twice (two processes writing one
stdout, their lines interleaved mid-line) keeps a non-finite value of it over a finite one.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from datacheck.trace.readers.fields import BadValue, count_text, to_float, to_int

__all__ = ["NAME", "parse_line", "starts_iteration", "cut_iteration", "begins_launch", "DatasetLines", "DatasetBuild", "LEGACY", "CORE"]

NAME = "megatron"
_ITER = re.compile(r"^\s*iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_VALID = re.compile(r"validation loss at iteration\s+(\d+)\s*\|(.*)$")
#: an iteration or validation line whose iteration is not a count (``iteration -5/ 20 |``,
#: ``iteration abc/ 20 |``, ``validation loss at iteration -1 |``): an unparsed line, never noise
_ITER_ANY = re.compile(r"^\s*iteration\s+([^\s/|]+)\s*/\s*([^\s|]*)\s*\|")
_VALID_ANY = re.compile(r"validation loss at iteration\s+([^\s|]+)\s*\|")
_INT = re.compile(r"-?\d+")
_KEYS = {
    "consumed samples": "tokens", "elapsed time per iteration (ms)": "wall_time_ms", "learning rate": "lr",
    "lm loss": "loss", "loss scale": "loss_scale", "grad norm": "grad_norm",
    "number of skipped iterations": "skipped", "number of nan iterations": "nan_steps",
    "global batch size": "global_batch",
}
#: the fields that are counts (int), the others floats
_COUNTS = frozenset({"skipped", "nan_steps", "global_batch"})


def _fields(rest: str) -> dict[str, str]:
    out = {}
    for part in rest.split("|"):
        k, sep, v = part.partition(":")
        if sep and v.strip():
            out[k.strip().lower()] = v.strip()
    return out


#: a field's key as it appears between the separators (blanks included) -> record field (None: not
#: one datacheck reads); a log repeats the same keys on every line, so each is normalised once.
_FIELD_OF_RAW: dict[str, str | None] = {}
_RAW_MAX = 1024


def _number(v: str, key: str, field: str) -> float | int | None:
    """``v`` as the field's number by the checked converters (blank -> None, ``1.0`` as a count).

    Raises:
        BadValue: not a number (not an integer for the iteration counts).
    """
    k, v = key.strip(), v.strip()
    return to_int(v, k) if field in _COUNTS else to_float(v, k)


def _count(v: str, key: str) -> int:
    """``v`` as an iteration count.

    Raises:
        BadValue: negative, not an integer, or beyond a 64-bit integer."""
    if _INT.fullmatch(v) is None:
        raise BadValue(f"{key}: {v[:40]!r} is not an integer")
    return count_text(v, key, "step")


def starts_iteration(text: str) -> bool:
    """Whether ``text`` is (the start of) an iteration line."""
    return "iteration" in text and _ITER.match(text) is not None


def cut_iteration(text: str) -> bool:
    """An iteration line that does not end with its closing ``|`` (wrapped, or cut mid-write)."""
    return "iteration" in text and not text.rstrip().endswith("|") and _ITER.match(text) is not None


def parse_line(text: str) -> dict[str, Any] | None:
    """The fields of a Megatron iteration or validation line, or None for any other line.

    Raises:
        BadValue: a known field's value is not a number, or the iteration (or the run's total after
            its ``/``) is not a count: negative, not an integer, or beyond a 64-bit integer (a run of
            digits longer than ``fields.MAX_COUNT_DIGITS`` included); ``consumed samples`` not finite
            (``nan``, or digits beyond any float).
    """
    if "iteration" not in text:  # cheap test first: most lines of a mixed log are not Megatron's
        return None
    m = _ITER.match(text)
    if m is None and _VALID.search(text) is None \
            and (bad := _ITER_ANY.match(text) or _VALID_ANY.search(text)) is not None:
        for i, key in enumerate(("iteration", "iterations")[:len(bad.groups())]):
            _count(bad.group(i + 1), key)  # raises for every line these match that _ITER and _VALID do not
    if m:
        out: dict[str, Any] = {"step": count_text(m.group(1), "iteration", "step")}
        for part in text[m.end():].split("|"):  # split + partition: 1.4x faster than a findall here
            k, _, v = part.partition(":")
            f = _FIELD_OF_RAW.get(k)
            if f is None:
                if k in _FIELD_OF_RAW or len(_FIELD_OF_RAW) >= _RAW_MAX:
                    continue
                f = _FIELD_OF_RAW[k] = _KEYS.get(k.strip().lower())
                if f is None:
                    continue
            try:  # int() / float() accept the blanks around the value; the checked converters when they fail
                x: float | int | None = int(v) if f in _COUNTS else float(v)
            except ValueError:
                x = _number(v, k, f)
            if f == "tokens" and x is not None and not math.isfinite(x):
                raise BadValue(f"consumed samples: {v.strip()[:40]!r} is not a sample count")
            if f == "wall_time_ms":
                out["wall_time"] = None if x is None else x / 1000.0
            elif f in out and isinstance(out[f], float) and not math.isfinite(out[f]):
                continue  # the field twice (two ranks' lines interleaved mid-line): a non-finite value stays
            else:
                out[f] = x
        return out
    m = _VALID.search(text)
    if m:
        vals = _fields(m.group(2))
        v = vals.get("lm loss value")
        if v is None:
            raise BadValue("validation line without 'lm loss value'")
        return {"step": count_text(m.group(1), "iteration", "step"), "loss": to_float(v, "lm loss value"),
                "split": "eval"}
    return None


# --- the dataset lines: what the run printed while it built its train GPTDataset ---------------------
#
# Legacy (Megatron-LM before megatron-core, Megatron-DeepSpeed / BigScience; bigscience-workshop/
# Megatron-DeepSpeed megatron/data/gpt_dataset.py @ 20c48380d94beb67e6c63594a5ca0477482128c1 and
# training.py), printed with ``print_rank_0``:
#
#   > datasets target sizes (minimum size):          training.py: the samples asked per split
#       train:      4000
#       number of documents: 10000                    get_indexed_dataset_: indexed_dataset.sizes.shape[0],
#                                                     the .idx's SEQUENCES (one per document unless split)
#       train:
#        document indices in [0, 9490) total of 9490 documents   get_train_valid_test_split_
#   > loading doc-idx mapping from PREFIX_train_indexmap_4000ns_1024sl_1234s_doc_idx.npy
#       total number of samples: 10353               sample_idx.shape[0]: the dataset's length + 1
#       total number of epochs: 1
#
# (later NVIDIA copies name the maps ``<md5>_doc_idx.npy`` in ``index-cache``: no facts in the name).
# megatron-core (0.16.1 gpt_dataset.py ``_build_document_sample_shuffle_indices``, indexed_dataset.py
# ``_IndexReader``, blended_megatron_dataset_builder.py), through ``logging`` (``INFO:<module>:`` or a
# timestamped prefix):
#
#   Building GPTDataset splits with sizes=(16000, 1680, 80) and config=GPTDatasetConfig(random_seed=1234,
#       sequence_length=512, ..., split='949,50,1', ...)
#   Load the _IndexReader from PREFIX.idx
#   > total number of sequences: 10000
#   > total number of documents: 10000
#   Build and save the GPTDataset train indices      (or "Load the GPTDataset train indices": cached)
#   > total number of samples: 55074                  sample_index.shape[0] - 1: the dataset's length
#   > total number of epochs: 1                       (printed only when the indices are built)

LEGACY = "legacy"
CORE = "megatron-core"
#: substrings one of which every dataset line holds (a line without any is never looked at again)
_DATA_CUES = ("number of documents", "total number of", "document indices", "mapping from", "target sizes",
              "train:", "GPTDataset", "_IndexReader", "arguments", " ..")
#: the arguments block (``_print_args``, both lineages): its lines ``  name ...... value``; the names read
_ARG = re.compile(r"^\s+(seed|seq_length|split|train_iters|train_samples|global_batch_size|micro_batch_size|"
                  r"data_parallel_size) \.{3,} (\S.{0,200}?)\s*$")
_INT_AFTER = re.compile(r":\s*(\d{1,19})\s*$")
_RANGE = re.compile(r"document indices in \[(\d{1,19}), (\d{1,19})\) total of (\d{1,19}) documents")
_INDEXMAP = re.compile(r"mapping from (\S*?)_(train|valid|test)_indexmap_(\d{1,19})ns_(\d{1,19})sl_(\d{1,19})s_doc_idx\.npy")
_DOC_MAP = re.compile(r"loading doc-idx mapping from (\S+)")
_SPLIT_NAME = re.compile(r"^\s*(train|validation|valid|test):\s*$")
_TARGET = re.compile(r"^\s*train:\s+(\d{1,19})\s*$")
_CORE_INDICES = re.compile(r"(?:Build and save|Load) the GPTDataset (train|valid|test) indices")
_CORE_READER = re.compile(r"Load the _IndexReader from (\S+?)(?:\.idx)?\s*$")
_CORE_SPLITS = re.compile(r"Building GPTDataset splits with sizes=[(\[]\s*(\d{1,19})")
_CORE_THREADS = re.compile(r"num_dataset_builder_threads=(\d{1,19})")
_CORE_CONFIG = {"seed": re.compile(r"random_seed=(\d{1,19})"), "seq_length": re.compile(r"sequence_length=(\d{1,19})"),
                "split": re.compile(r"\bsplit='([^']*)'")}

#: one fact a dataset line states: (value, line number, the line's text cut to 160 characters)
Fact = tuple[Any, int, str]


@dataclass
class DatasetBuild:
    """The lines one prefix's train GPTDataset printed while it was built (or loaded).

    Attributes:
        wording: the lineage whose wording printed them (:data:`LEGACY` or :data:`CORE`): legacy's
            ``total number of samples`` is the sample index's rows (the dataset's length + 1),
            megatron-core's the dataset's length.
        prefix: the data prefix the lines name (the index map file's, or ``_IndexReader``'s path
            without ``.idx``), None when they name none.
        facts: ``sequences`` (legacy ``number of documents``, megatron-core ``total number of
            sequences``: the ``.idx``'s sequences), ``documents`` (megatron-core: the ``.idx``'s
            documents), ``train_range`` ((begin, end)), ``index_name`` ((samples asked, seq_length,
            seed) from ``..._train_indexmap_<ns>ns_<sl>sl_<s>s_doc_idx.npy``), ``samples``,
            ``epochs`` (of the train dataset), each a :data:`Fact`.
        train: the lines built a train dataset of this prefix (a prefix read only for validation
            or test, ``--valid-data-path``, is no train build).
    """

    wording: str
    prefix: str | None = None
    facts: dict[str, Fact] = field(default_factory=dict)
    train: bool = False


def begins_launch(text: str) -> bool:
    """True for the line that opens a launch's arguments block (``------------------------ arguments
    ------------------------``, both lineages' ``_print_args``: printed once at every launch, a
    resume's and a restart's alike)."""
    return "arguments" in text and "----" in text and "end of arguments" not in text


@dataclass
class DatasetLines:
    """The dataset lines of one Megatron log, read line by line (:meth:`feed`), both lineages'
    wordings (comment block above). A log that holds several launches (a run restarted or resumed and
    appended to the same file) is read launch by launch: a launch begins at its arguments block (both
    lineages' ``_print_args``, printed once a launch; a blend's prefixes each print a build, and some
    print the train target per build, so neither begins one); :meth:`launches` gives each launch's
    lines (the earlier ones kept in ``earlier``), and the attributes below are the last launch's.
    Within a launch a dataset built twice keeps both builds; :meth:`train_builds` gives the last of
    each prefix.

    Attributes:
        builds: every GPTDataset build seen (train facts only), in log order.
        run: run-wide facts: ``target`` (``datasets target sizes`` / megatron-core's ``sizes=``: the
            train samples asked), and from megatron-core's config line ``seed``, ``seq_length``,
            ``split``; each a :data:`Fact`.
        args: the run's arguments block (``------ arguments ------``, both lineages' ``_print_args``):
            ``seed``, ``seq_length``, ``split``, ``train_iters``, ``train_samples``,
            ``global_batch_size``, ``micro_batch_size``, ``data_parallel_size`` as printed (an integer,
            None for ``None``, else the text); the last block of the log.
        threaded: megatron-core's config line sets ``num_dataset_builder_threads`` above 1: the
            prefixes' lines may interleave, so no build's lines are attributed (:meth:`train_builds`
            gives none; the run-wide facts stand).
        first_line: the line the launch began at (its arguments block; 1 for a log that printed none
            before its first fact).
        earlier: the log's earlier launches, in log order (each a :class:`DatasetLines`).
    """

    builds: list[DatasetBuild] = field(default_factory=list)
    run: dict[str, Fact] = field(default_factory=dict)
    threaded: bool = False
    args: dict[str, Fact] = field(default_factory=dict)
    first_line: int = 1
    earlier: list["DatasetLines"] = field(default_factory=list)
    _cur: DatasetBuild | None = None
    _split: str | None = None  # the split a "document indices" line belongs to
    _indices: str | None = None  # the split whose samples / epochs lines come next
    _target: bool = False  # the next "train: N" line is the train target
    _maps: int = 0  # doc-idx maps loaded since the build began (hash-named maps: the first is train)
    _args: bool = False  # inside the arguments block

    def launches(self) -> list["DatasetLines"]:
        """Every launch of the log, in log order (the last is this object)."""
        return [*self.earlier, self]

    def _launch(self, n: int) -> None:
        """Line ``n`` begins a new launch: the launch read so far is kept in ``earlier`` when it holds a fact."""
        if not (self.builds or self.run or self.args):
            self.first_line = n
            return
        done = DatasetLines(builds=self.builds, run=self.run, threaded=self.threaded, args=self.args,
                            first_line=self.first_line)
        self.earlier.append(done)
        self.builds, self.run, self.threaded, self.args = [], {}, False, {}
        self.first_line = n
        self._cur = self._split = self._indices = None
        self._target = False
        self._maps = 0

    def _build(self, wording: str) -> DatasetBuild:
        if self._cur is None or self._cur.wording != wording:
            self._cur = DatasetBuild(wording)
            self.builds.append(self._cur)
        return self._cur

    def _new(self, wording: str, prefix: str | None = None) -> DatasetBuild:
        self._cur = DatasetBuild(wording, prefix)
        self.builds.append(self._cur)
        self._split = self._indices = None
        self._maps = 0
        return self._cur

    def feed(self, n: int, text: str) -> None:
        """Read line ``n`` (1-based) if it is a dataset line (any other line is passed over by a
        substring test)."""
        if not any(c in text for c in _DATA_CUES):
            return
        where: Fact = (None, n, text.strip()[:160])

        def fact(v: Any) -> Fact:
            return (v, where[1], where[2])

        if "arguments" in text and "----" in text:
            self._args = begins_launch(text)
            if self._args:
                self._launch(n)  # a launch's block: a restarted or resumed run appended begins a launch
            return
        if self._args:
            if (a := _ARG.match(text)) is not None:
                v = a.group(2)
                self.args[a.group(1)] = fact(None if v == "None" else v if a.group(1) == "split" else
                                             int(v) if v.isdigit() and len(v) <= 19 else v)
            return
        m = _INT_AFTER.search(text)
        val = int(m.group(1)) if m else None
        if "target sizes" in text:
            self._target = True
            return
        if self._target and (t := _TARGET.match(text)) is not None:
            self.run["target"] = fact(int(t.group(1)))
            self._target = False
            return
        self._target = False
        if (c := _CORE_SPLITS.search(text)) is not None:
            self.run["target"] = fact(int(c.group(1)))
            th = _CORE_THREADS.search(text)
            self.threaded = th is not None and int(th.group(1)) > 1
            for k, rx in _CORE_CONFIG.items():
                if (x := rx.search(text)) is not None:
                    self.run[k] = fact(x.group(1) if k == "split" else int(x.group(1)))
            return
        if (r := _CORE_READER.search(text)) is not None:
            self._new(CORE, r.group(1))
            return
        if "> total number of sequences" in text and val is not None:
            self._build(CORE).facts["sequences"] = fact(val)
            return
        if "> total number of documents" in text and val is not None:
            self._build(CORE).facts["documents"] = fact(val)
            return
        if (ci := _CORE_INDICES.search(text)) is not None:
            self._build(CORE).train |= ci.group(1) == "train"
            self._indices = ci.group(1)
            return
        if "number of documents" in text and "total number of" not in text and val is not None:
            self._new(LEGACY).facts["sequences"] = fact(val)
            return
        if (s := _SPLIT_NAME.match(text)) is not None:
            self._split = s.group(1)
            return
        if (rg := _RANGE.search(text)) is not None:
            if self._split == "train" and self._cur is not None and self._cur.wording == LEGACY:
                self._cur.facts["train_range"] = fact((int(rg.group(1)), int(rg.group(2))))
                self._cur.train = True
            self._split = None
            return
        if "loading doc-idx mapping from" in text:
            b = self._build(LEGACY)
            im = _INDEXMAP.search(text)
            self._maps += 1
            if im is not None:
                self._indices = im.group(2)
                b.prefix = im.group(1)
                if im.group(2) == "train":
                    b.facts["index_name"] = fact((int(im.group(3)), int(im.group(4)), int(im.group(5))))
            else:
                self._indices = "train" if self._maps == 1 else "other"
            b.train |= self._indices == "train"
            return
        if val is None or self._cur is None or self._indices != "train":
            return
        core = "> total number of" in text  # legacy prints "    total number of samples: N"
        if core != (self._cur.wording == CORE):
            return  # the other lineage's wording inside this build: not its line
        if "total number of samples" in text:
            self._cur.facts["samples"] = fact(val)
        elif "total number of epochs" in text:
            self._cur.facts["epochs"] = fact(val)

    def train_builds(self) -> list[DatasetBuild]:
        """The last train build of each prefix that states a fact, in log order of their prefixes
        (none when the builds were threaded: :attr:`threaded`)."""
        last: dict[str | None, DatasetBuild] = {}
        for b in self.builds:
            if b.facts and b.train and not self.threaded:
                last[b.prefix] = b
        return list(last.values())
