"""The versioned audit report (JSON contract in DESIGN.md, JSON Schema in ``schemas/report.schema.json``).

Written atomically (:func:`datacheck.io.outputs.write_atomic`: temporary file in the target's folder, fsync,
rename; links written through, devices written in place) and deterministically
(sorted keys). :func:`read_report` refuses a newer ``report_version`` with a clear message.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from datacheck.io.jsontext import dumps_sorted_indented
from datacheck.io.outputs import write_atomic, write_json_atomic
from datacheck.io.reportcopies import EXTRA as COPY_EXTRA
from datacheck.io.reportcopies import against_key, copy_name, parse_copy_name, prune_copies, write_copy
from datacheck.io.safejson import JsonInputError, read_json_file
from datacheck.model.constants import FAIL_ON, REPORT_VERSION
from datacheck.model.errors import PolicyFailed, ReportVersionError, UsageError
from datacheck.model.findings import Finding, Skipped

__all__ = ["Report", "ShardReport", "StoredCopy", "config_folder", "config_report_path", "describe_stored",
           "find_report", "read_report", "report_path", "store_report", "stored_copies", "stored_report_paths"]

#: Top-level keys every report has (DESIGN.md report contract); a JSON file without one of them is
#: "not a datacheck report" (UsageError), never a KeyError.
_REQUIRED_KEYS = ("datacheck_version", "created_at", "index_hash", "config_hash", "summary")


@dataclass(frozen=True)
class ShardReport:
    """One shard in the report. ``rows`` is None when the shard could not be read.

    ``row_content`` (``{"columns": [...]}``) is set only when the readable shards' row contents are
    made of different columns (then the report-level ``row_content.columns`` is None): the columns
    this shard's row hashes (``dup.*``) were computed over.

    ``layout`` is the shard's layout name (None: unknown), ``layout_source`` where it came from
    (``config``, ``schema``, ``recognized``, ``unknown``; ``""`` for a shard that could not be read),
    ``layout_why`` the evidence or why none was found, ``not_applicable`` how many shard-level checks
    do not apply to that layout (``datacheck checks --layout NAME`` lists them)."""

    path: str
    content_hash: str
    bytes: int
    rows: int | None
    status: str
    format: str
    findings: tuple[Finding, ...] = ()
    stats: dict[str, Any] = field(default_factory=dict)
    columns: dict[str, str] = field(default_factory=dict)
    row_content: dict[str, Any] | None = None
    layout: str | None = None
    layout_source: str = ""
    layout_why: str = ""
    not_applicable: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = {
            "path": self.path, "content_hash": self.content_hash, "bytes": self.bytes, "rows": self.rows,
            "status": self.status, "format": self.format,
            "findings": [f.to_dict() for f in self.findings], "stats": self.stats, "columns": self.columns,
            "layout": self.layout, "layout_source": self.layout_source, "layout_why": self.layout_why,
            "not_applicable": self.not_applicable,
        }
        if self.row_content is not None:
            d["row_content"] = self.row_content
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ShardReport":
        return cls(path=d["path"], content_hash=d["content_hash"], bytes=d["bytes"], rows=d.get("rows"),
                   status=d["status"], format=d.get("format", ""),
                   findings=tuple(Finding.from_dict(f) for f in d.get("findings", [])),
                   stats=d.get("stats", {}), columns=d.get("columns", {}), row_content=d.get("row_content"),
                   layout=d.get("layout"), layout_source=d.get("layout_source", ""), layout_why=d.get("layout_why", ""),
                   not_applicable=int(d.get("not_applicable", 0)))


@dataclass(frozen=True)
class Report:
    """The audit report as typed objects (the same content as the CLI's JSON).

    ``passed`` is False when a finding fails the policy; ``findings`` lists every finding, shard-level
    ones first (with their shard in ``shards``) then dataset-level ones; ``raise_for_policy()`` raises
    :class:`~datacheck.model.errors.PolicyFailed`.
    """

    datacheck_version: str
    created_at: str
    index_hash: str
    config_hash: str
    fail_on: str
    roles: dict[str, Any]
    summary: dict[str, Any]
    shards: tuple[ShardReport, ...]
    dataset_findings: tuple[Finding, ...]
    skipped: tuple[dict[str, Any], ...]
    stats: dict[str, Any] = field(default_factory=dict)
    row_content: dict[str, Any] = field(default_factory=dict)
    report_version: int = REPORT_VERSION
    #: only in the report of one part of a split audit (:mod:`datacheck.execute.parts`): ``num_parts``,
    #: ``part``, ``results_file`` (the results sidecar beside the report) and ``results_digest``
    part: dict[str, Any] | None = None
    #: the config file used, as given or found (None: no file: the defaults, or a config the Python
    #: API got in memory); see :func:`datacheck.api.resolve_config_path`
    config_path: str | None = None
    #: files under the audited paths that look like data but are not audited: ``{"path", "reason"}``
    ignored: tuple[dict[str, str], ...] = ()
    #: the ``[tokens]`` facts taken from ``[tokens] tokenizer`` because the config left them unset:
    #: ``{"tokenizer": path as written, "facts": {"vocab_size": ..., "pad_token_id": ...}}``
    #: (:attr:`datacheck.model.config.Config.tokenizer_facts`); None (no key in the JSON) when none was
    tokenizer_facts: dict[str, Any] | None = None
    #: the class count the data's Hugging Face ``ClassLabel`` declaration gave the label column
    #: (:attr:`datacheck.model.config.Config.label_facts`): ``{"column", "num_classes", "names", "source",
    #: "filled"}`` (``filled``: taken as ``[labels] num_classes``; false: the config's own value was kept),
    #: plus ``"note"`` when the config disagrees or the shards do; None (no key in the JSON) when none
    label_facts: dict[str, Any] | None = None
    #: how this run got the shards' results, set by the single-job audit and by a part audit (its
    #: part's shards) (:func:`datacheck.execute.audit.reading_of`): ``{"shards": N, "read": r, "from_cache": c}``
    #: (``from_cache`` None: no cache). Never in the JSON: the report describes the data, and identical
    #: data gives the same report byte for byte (``created_at`` aside) whether its shards were read or
    #: answered from the cache (docs/ci.md); the CLI's text summary shows it. None: not known (a
    #: report read back from JSON, a merged report).
    reading: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    #: what changed the defaults of a config given by no file (:meth:`datacheck.model.config.Config.default_changes`:
    #: ``--schema``, the data's splits or classes, a config given in memory), for the text's config
    #: line; set by the single-job and part audits. Never in the JSON (the config hash says the config
    #: differs; the line says why). None: not known (a report read back from JSON, a merged report).
    config_changes: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def status(self) -> str:
        return self.summary["status"]

    @property
    def passed(self) -> bool:
        return self.summary["status"] != "fail"

    @property
    def check_errors(self) -> int:
        """How many checks failed internally (``summary.check_errors``; 0 when the key is absent)."""
        return int(self.summary.get("check_errors", 0))

    @property
    def failed_by_check_errors(self) -> bool:
        """True when check errors alone made this report fail: no finding fails the policy, yet
        the status is ``fail`` (the user did not allow check errors)."""
        return self.check_errors > 0 and self.status == "fail" and not self.failures()

    @property
    def findings(self) -> list[Finding]:
        out = [f.with_(shards=(s.path,)) for s in self.shards for f in s.findings]
        return out + list(self.dataset_findings)

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.fails_policy]

    def raise_for_policy(self) -> None:
        """Raise :class:`PolicyFailed` (listing the failing checks) when the report did not pass."""
        if self.passed:
            return
        fails = self.failures()
        head = "; ".join(f"{f.check} in {', '.join(f.shards) or 'dataset'} ({f.count})" for f in fails[:5])
        errs = ""
        if self.check_errors and not self.passed:
            names = sorted({s["check"] for s in self.skipped if s.get("error")})
            errs = (f"{self.check_errors} check error(s) (datacheck failed to run {', '.join(names[:5])}; "
                    "see 'skipped'; allow_check_errors=True to gate on the findings only)")
        if not fails:
            raise PolicyFailed(f"data gate failed: {errs}", report=self)
        msg = f"data gate failed: {len(fails)} finding(s) fail the policy: {head}"
        raise PolicyFailed(msg + (f"; and {errs}" if errs else ""), report=self)

    def to_dict(self) -> dict[str, Any]:
        d = self._to_dict()
        if self.part is not None:
            d["part"] = self.part
        if self.tokenizer_facts is not None:
            d["tokenizer_facts"] = self.tokenizer_facts
        if self.label_facts is not None:
            d["label_facts"] = self.label_facts
        return d

    def _to_dict(self) -> dict[str, Any]:
        return {
            "report_version": self.report_version,
            "datacheck_version": self.datacheck_version,
            "created_at": self.created_at,
            "index_hash": self.index_hash,
            "config_hash": self.config_hash,
            "fail_on": self.fail_on,
            "roles": self.roles,
            "summary": self.summary,
            "shards": [s.to_dict() for s in self.shards],
            "findings": [f.to_dict(dataset_level=True) for f in self.dataset_findings],
            "skipped": list(self.skipped),
            "stats": self.stats,
            "row_content": self.row_content,
            "config_path": self.config_path,
            "ignored": [dict(i) for i in self.ignored],
        }

    def to_json(self) -> str:
        return dumps_sorted_indented(self.to_dict()) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "report") -> "Report":
        v = d.get("report_version")
        if not isinstance(v, int):
            raise ReportVersionError(f"{source}: no integer report_version: not a datacheck report")
        if v > REPORT_VERSION:
            raise ReportVersionError(
                f"{source}: report_version {v} is newer than this datacheck reads ({REPORT_VERSION}); "
                "upgrade datacheck (install a newer release from its source)")
        missing = [k for k in _REQUIRED_KEYS if k not in d]
        if missing:
            raise UsageError(f"{source}: not a datacheck report: missing key {missing[0]!r}")
        if not isinstance(d["summary"], dict) or "status" not in d["summary"]:
            raise UsageError(f"{source}: not a datacheck report: missing key 'summary.status'")
        return cls(
            report_version=v, datacheck_version=d["datacheck_version"], created_at=d["created_at"],
            index_hash=d["index_hash"], config_hash=d["config_hash"], fail_on=d.get("fail_on", "error"),
            roles=d.get("roles", {}), summary=d["summary"],
            shards=tuple(ShardReport.from_dict(s) for s in d.get("shards", [])),
            dataset_findings=tuple(Finding.from_dict(f) for f in d.get("findings", [])),
            skipped=tuple(d.get("skipped", [])), stats=d.get("stats", {}), row_content=d.get("row_content", {}),
            part=d.get("part"), config_path=d.get("config_path"), ignored=tuple(d.get("ignored", [])),
            tokenizer_facts=d.get("tokenizer_facts"),
            label_facts=d.get("label_facts"),
        )




def config_folder(config_hash: str, fail_on: str = "error", against: str | None = None,
                  allow_check_errors: bool = False, part: tuple[int, int] | None = None) -> str:
    """The folder name of a report's config copy in its index hash's folder
    (:func:`datacheck.io.reportcopies.copy_name`): the hex digits of ``config_hash`` (``sha256:<64 hex>``
    -> the 64 hex digits, all of them: two configs never share a folder), followed by ``.fail-on-warn``
    or ``.fail-on-never`` when the gate's ``fail_on`` is not the default ``error`` (the same findings,
    another verdict), ``.against-<16 hex>`` for an audit with ``--against`` (``against``:
    :func:`~datacheck.io.reportcopies.against_key`), ``.allow-check-errors`` when check errors were
    allowed and the report has some (they then do not decide its status), and ``.part-K-of-N`` for the
    report of one part of a split audit (``part``: (K, N)).

    Raises:
        UsageError: ``config_hash`` is not an algorithm-prefixed hex digest, ``fail_on`` is not one
            of :data:`~datacheck.model.constants.FAIL_ON`, ``against`` is no key, or ``part`` no pair of
            part numbers (never a folder name that could leave the index hash's folder).
    """
    return copy_name(config_hash, fail_on, against, allow_check_errors, part)


def report_path(report_dir: str | Path, index_hash: str) -> Path:
    """``<report-dir>/<index_hash>/report.json``: where every audit stores its report (DESIGN.md CLI
    contract), the latest audit of that data replacing the one before, whatever its config. The same
    bytes are also stored as :func:`config_report_path`."""
    return Path(report_dir) / index_hash / "report.json"


def config_report_path(report_dir: str | Path, index_hash: str, config_hash: str, fail_on: str,
                       against: str | None = None, allow_check_errors: bool = False,
                       part: tuple[int, int] | None = None) -> Path:
    """``<report-dir>/<index_hash>/<config hash hex>[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]
    /report.json`` (:func:`config_folder`): the config-keyed copy of the report an audit stores at
    :func:`report_path` (the same bytes), keyed by the data (``index_hash``) and by what audited it
    (``config_hash``, the gate's ``fail_on``, the ``--against`` datasets, allowed check errors, the
    part), so that a strict and a lenient ``[policy]``, two schemas, ``--fail-on error`` and ``warn``,
    or an audit with and without ``--against`` of the same data each keep the report they were gated
    on. :func:`find_report` looks it up as ``INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]``.

    Raises:
        UsageError: see :func:`config_folder`.
    """
    name = config_folder(config_hash, fail_on, against, allow_check_errors, part)
    return Path(report_dir) / index_hash / name / "report.json"


def stored_report_paths(report_dir: str | Path, report: Report, against: Iterable[str] | None = None,
                        allow_check_errors: bool = False, part: tuple[int, int] | None = None) -> tuple[Path, Path]:
    """The two files an audit (or a merge) stores ``report`` as: (:func:`report_path`,
    :func:`config_report_path`), written with the same bytes. ``against``: the ``--against`` datasets
    as given (:func:`~datacheck.io.reportcopies.against_key`); ``allow_check_errors``: the flag (part
    of the copy's key only when ``report`` has check errors); ``part``: (K, N) of a part audit (None:
    ``report.part``'s, when it is a part report read back).

    Raises:
        UsageError: see :func:`config_folder`.
    """
    if part is None and report.part is not None:
        part = (report.part.get("part"), report.part.get("num_parts"))
    return (report_path(report_dir, report.index_hash),
            config_report_path(report_dir, report.index_hash, report.config_hash, report.fail_on,
                               against_key(against), bool(allow_check_errors and report.check_errors), part))


def store_report(report_dir: str | Path, report: Report, text: str, against: Iterable[str] | None = None,
                 allow_check_errors: bool = False, write: Callable[[Path], object] | None = None,
                 part: tuple[int, int] | None = None) -> tuple[Path, Path]:
    """Store ``report`` (its JSON ``text``) in ``report_dir``: the config copy first, then the contract
    file (written last, it is the latest), both atomically (:func:`stored_report_paths`); then the
    copies of its index hash beyond :data:`~datacheck.io.reportcopies.MAX_COPIES` are deleted
    (:func:`~datacheck.io.reportcopies.prune_copies`; never the contract file or this copy).
    ``write``: the writer of one file (default: ``text`` written by
    :func:`~datacheck.io.outputs.write_json_atomic`; a part audit writes its sidecar too); ``part``:
    (K, N) of a part audit. Returns (contract file, copy).

    Raises:
        UsageError: a file cannot be written (the message names it), or see :func:`config_folder`.
    """
    stored, copy = stored_report_paths(report_dir, report, against, allow_check_errors, part)
    if write is None:
        write_copy(copy, lambda p: write_atomic(p, text, os_errors=True))
        write_json_atomic(stored, text)
    else:
        write_copy(copy, write)
        write(stored)
    prune_copies(copy.parent.parent, keep=copy.parent.name)
    return stored, copy


#: an index hash or a prefix of it long enough to name one report (6 to 32 lowercase hex digits)
#: the fewest hex digits of an index hash prefix that ``find_report`` looks up
MIN_PREFIX = 6
_HEX = re.compile(r"^[0-9a-f]{%d,32}$" % MIN_PREFIX)
#: ``INDEX/CONFIG[.fail-on-X][.against-K][.allow-check-errors][.part-K-of-N]``: an index hash (prefix), a
#: config hash prefix (the hex digits of ``config_hash``), optionally the gate's ``fail_on``, then what
#: follows it in the copy's folder name (:func:`config_folder`)
_HEX_CFG = re.compile(r"^([0-9a-f]{%d,32})/([0-9a-f]{%d,128})(?:\.fail-on-(%s))?(%s)$"
                      % (MIN_PREFIX, MIN_PREFIX, "|".join(FAIL_ON), COPY_EXTRA))


@dataclass(frozen=True)
class StoredCopy:
    """One config-keyed copy in an index hash's folder (:func:`config_report_path`): its file, the
    hex digits of its config hash, its gate's ``fail_on``, ``ref``, the ``INDEX/CONFIG[.fail-on-X]
    [.against-K][.allow-check-errors][.part-K-of-N]`` that :func:`find_report` resolves to it (8 config
    digits; the gate spelled out when the same config was stored under another ``fail_on`` too with the
    same rest; the rest always spelled out), and ``extra``, that rest of its folder name (``""``: an audit
    without ``--against``, allowed check errors or parts)."""

    path: Path
    config: str
    fail_on: str
    ref: str
    extra: str = ""


def stored_copies(report_dir: str | Path, index_hash: str) -> list[StoredCopy]:
    """The config-keyed copies stored for ``index_hash`` (a full hash: its folder's name), sorted by
    folder name; ``[]`` when there is none or no such folder."""
    folder = Path(report_dir) / index_hash
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = []
    for name in names:
        got = parse_copy_name(name)
        if got is not None and (folder / name / "report.json").is_file():
            found.append((folder / name / "report.json", *got))
    seen = [(c, extra) for _, c, _, extra in found]
    return [StoredCopy(p, c, fail_on, f"{index_hash}/{c[:8]}" + (f".fail-on-{fail_on}" if seen.count((c, extra)) > 1
                                                                  else "") + extra, extra)
            for p, c, fail_on, extra in found]


def _peek(path: Path) -> dict[str, Any]:
    """The top level of a stored report, for what tells it apart (config hash, ``fail_on``, config
    file, creation time, status); ``{}`` when it cannot be read."""
    try:
        d = read_json_file(path)
    except (OSError, JsonInputError):
        return {}
    return d if isinstance(d, dict) else {}


def describe_stored(path: Path) -> str:
    """``config FILE, fail_on X, created AT, status S`` of one stored report (``?`` for what cannot be read)."""
    d = _peek(path)
    summary = d.get("summary") if isinstance(d.get("summary"), dict) else {}
    return (f"config {d.get('config_path') or 'defaults'}, fail_on {d.get('fail_on', '?')}, "
            f"created {d.get('created_at', '?')}, status {summary.get('status', '?')}")


def _choose_copy(index_hash: str, report_dir: str | Path, config_prefix: str, fail_on: str | None,
                 extra: str = "") -> Path:
    """The one stored report of ``index_hash`` whose config hash starts with ``config_prefix``, whose
    gate is ``fail_on`` (None: any) and whose folder name ends in ``extra`` after the gate (exactly:
    ``--against``, allowed check errors, the part; a reference without them names the copy of an
    audit without them): a config copy; else, when no copy matches and none is asked for, the
    contract file ``<index_hash>/report.json`` when its own config and ``fail_on`` match (a report
    stored by a version that wrote no copies). Raises UsageError naming the stored copies and the
    reference that picks each when none or several match."""
    copies = stored_copies(report_dir, index_hash)
    hits = [s.path for s in copies if s.config.startswith(config_prefix) and fail_on in (None, s.fail_on)
            and s.extra == extra]
    if not hits and not extra:
        latest = report_path(report_dir, index_hash)
        d = _peek(latest) if latest.is_file() else {}
        cfg, gate = d.get("config_hash"), d.get("fail_on", "error")
        if isinstance(cfg, str) and cfg.rpartition(":")[2].startswith(config_prefix) and fail_on in (None, gate):
            return latest
    if len(hits) == 1:
        return hits[0]
    asked = f"{index_hash}/{config_prefix}{f'.fail-on-{fail_on}' if fail_on else ''}{extra}"
    listing = "; ".join(f"{s.ref} ({describe_stored(s.path)})" for s in copies) or "none"
    how = (f"name one as INDEX/CONFIG (the reference before each), or give {index_hash} alone for the latest "
           "audit's report")
    if not hits:
        raise UsageError(f"{asked}: no stored report of this data matches in {report_dir}; config copies: {listing}; "
                         f"{how}")
    raise UsageError(f"{asked}: {len(hits)} stored reports match (the same config under several --fail-on) in "
                     f"{report_dir}: {listing}; {how}")


def find_report(ref: str | Path, report_dir: str | Path) -> Path:
    """The report file ``ref`` names. The one resolver of every verb that takes a stored report
    (``diff``, ``report``):

    - a file path: that file;
    - an index hash, or a unique prefix of at least 6 hex digits: ``<report_dir>/<index_hash>/report.json``
      (:func:`report_path`, the DESIGN.md contract's file: the latest audit of that data, whatever its
      config), never refused because other configs' copies are stored beside it;
    - ``INDEX/CONFIG[.fail-on-error|warn|never][.against-K][.allow-check-errors][.part-K-of-N]``: an index hash (prefix) and a prefix (at least 6 hex
      digits) of the config hash's digits: the config-keyed copy (:func:`config_report_path`); without
      the ``.fail-on-X`` suffix, whichever gate was stored while only one was; followed by
      ``.against-K`` / ``.allow-check-errors`` / ``.part-K-of-N`` for the copy of an audit with
      ``--against`` / allowed check errors / of a part (without them: the copy of an audit without); a report stored before copies were
      written is found by its own config (read from it).

    Raises:
        UsageError: no such file or hash, an ambiguous index hash prefix, no or several copies matching
            ``INDEX/CONFIG`` (each stored copy listed with the reference that names it).
    """
    ref = str(ref)
    p = Path(ref)
    if p.exists():  # a file; or a folder, that read_report refuses with its own message
        return p
    pair = _HEX_CFG.match(ref)
    if _HEX.match(ref) or pair:
        index_ref, config_prefix, fail_on = (pair.group(1), pair.group(2), pair.group(3)) if pair else (ref, None, None)
        extra = pair.group(4) if pair else ""
        base = Path(report_dir)

        def stored(d: Path) -> bool:  # an index hash's folder holding the contract file or a config copy
            return (d / "report.json").is_file() or (config_prefix is not None and bool(stored_copies(base, d.name)))

        exact = base / index_ref
        if exact.is_dir() and stored(exact):
            hits = [exact]
        else:
            hits = sorted(d for d in base.glob(f"{index_ref}*") if d.is_dir() and stored(d)) if base.is_dir() else []
        if len(hits) > 1:
            raise UsageError(f"{index_ref}: ambiguous index hash prefix in {report_dir} ({len(hits)} reports); "
                             "give more digits")
        if hits and config_prefix is not None:
            return _choose_copy(hits[0].name, report_dir, config_prefix, fail_on, extra)
        if hits:
            return hits[0] / "report.json"
        copies = [s for d in (base.glob(f"{index_ref}*") if base.is_dir() else []) for s in stored_copies(base, d.name)]
        if copies:  # config copies without the latest report (deleted): name them
            raise UsageError(f"{ref}: no report {report_dir}/{index_ref}*/report.json; config copies stored: "
                             + "; ".join(f"{s.ref} ({describe_stored(s.path)})" for s in copies)
                             + ": name one as INDEX/CONFIG")
        raise UsageError(f"{ref}: no report file, and no report {report_dir}/{index_ref}*/report.json (set --report-dir)")
    if re.fullmatch(r"[0-9a-fA-F]{1,32}", ref):  # a hash prefix too short (or in capitals) to look up
        got = f"got {len(ref)}" if len(ref) < MIN_PREFIX else "write them in lowercase"
        raise UsageError(f"{ref}: no such report file; an index hash prefix needs at least {MIN_PREFIX} "
                         f"lowercase hex digits ({got}), as `datacheck audit` prints it")
    raise UsageError(f"{ref}: no such report file (or index hash of at least {MIN_PREFIX} hex digits, or "
                     f"INDEX/CONFIG hash prefixes, in --report-dir {report_dir})")


def read_report(path: str | Path) -> Report:
    """Read a report file.

    Raises:
        UsageError: the file is missing, a folder, unreadable, not JSON, or not a datacheck report
            ("not a datacheck report: missing key 'X'").
        ReportVersionError: the report is newer than this datacheck reads.
    """
    path = Path(path)
    try:
        d = read_json_file(path)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such report file") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a folder; give a report file (e.g. {path / 'report.json'})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except JsonInputError as exc:
        raise UsageError(f"{path}: not a JSON report ({exc.reason})") from None
    if not isinstance(d, dict):
        raise UsageError(f"{path}: not a datacheck report (top level is not an object)")
    try:
        return Report.from_dict(d, source=str(path))
    except KeyError as exc:  # a shard or finding entry without one of its keys
        raise UsageError(f"{path}: not a datacheck report: missing key {exc}") from None
    except (TypeError, AttributeError, ValueError) as exc:  # an entry of the wrong JSON type
        raise UsageError(f"{path}: not a datacheck report: malformed entry ({exc})") from None


def skipped_dicts(items: list[tuple[str, Skipped]]) -> list[dict[str, Any]]:
    """Group (shard, Skipped) pairs into sorted ``{check, reason, shards}`` entries; a check error
    (``Skipped.error``) also carries ``"error": true`` and is never grouped with a plain skip."""
    grouped: dict[tuple[str, str, bool], list[str]] = {}
    for shard, s in items:
        key = (s.check, s.reason, s.error)
        grouped.setdefault(key, [])
        if shard and shard not in grouped[key]:
            grouped[key].append(shard)
    out: list[dict[str, Any]] = []
    for (c, r, err), sh in sorted(grouped.items()):
        d: dict[str, Any] = {"check": c, "reason": r, "shards": sorted(sh)}
        if err:
            d["error"] = True
        out.append(d)
    return out
