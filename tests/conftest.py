"""Shared test fixtures: paths to ../shared (cases, real data); ``run_cli`` (the CLI in the test's
process) and ``run_cli_subprocess`` (a real ``python -m datacheck`` process, for pipes, TTYs, signals
and the entry point itself); ``case_audits`` (each shared case audited once per run); the Hypothesis
profiles ``dev``, ``ci`` and ``explore`` (``HYPOTHESIS_PROFILE``) and :func:`examples`.

Test hygiene: no test writes into the repository's own ``.datacheck/``. ``DATACHECK_DIR`` (the base
folder of the CLI's default report and cache folders, :mod:`datacheck.cli.defaults`) points at a
temporary folder for the whole run, so in-process CLI calls and subprocesses (which inherit the
environment) that rely on the defaults write there; the session fails when the repository's
``.datacheck/`` listing changed during the run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, settings

from datacheck.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CASES = SHARED / "cases"
REALDATA = SHARED / "realdata"
REPO_STATE = ROOT / ".datacheck"

#: one temporary base folder per pytest process (each xdist worker imports this module itself)
_TEST_STATE = tempfile.mkdtemp(prefix="datacheck-tests-")
os.environ["DATACHECK_DIR"] = _TEST_STATE
#: audits in the suite run in the test's own process unless a test asks for workers (the suite
#: already runs under xdist, and tests that patch datacheck's functions must see their own calls);
#: tests/unit/execute/test_executors.py runs the process pool explicitly
os.environ.setdefault("DATACHECK_WORKERS", "1")


#: Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (default ``dev``): ``ci`` runs each property
#: test's own example count (its ``@settings(max_examples=examples(N))``: N), ``dev`` a tenth of it
#: (at least 5); a test without its own count runs Hypothesis' default 100 under ``ci``, 10 under ``dev``.
#: All print the blob that reproduces a failure and have no deadline.
#:
#: ``ci`` is derandomized (as Hypothesis' own ``ci`` profile): each test draws the same examples on every
#: run (seeded from the test function's source), so the gate's verdict depends on the code alone, never
#: on a new random example; it uses no example database and no timing health check (``too_slow``: a
#: loaded CI machine is no defect). ``dev`` draws new examples each run (with the local database): that
#: is where new counterexamples are found, as is ``explore``: ``ci``'s counts with new random examples
#: (``--hypothesis-seed N`` repeats one such run). A real counterexample is fixed in datacheck and pinned
#: with ``@example``.
HYPOTHESIS_PROFILES = {"ci": 1.0, "explore": 1.0, "dev": 0.1}
settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True, derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=100, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=10, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def examples(n: int) -> int:
    """A property test's example count ``n`` under the current Hypothesis profile (see
    :data:`HYPOTHESIS_PROFILES`): ``n`` under ``ci``, ``max(5, n // 10)`` under ``dev``."""
    fraction = HYPOTHESIS_PROFILES.get(settings.get_current_profile_name(), 1.0)
    return n if fraction >= 1.0 else max(5, int(n * fraction))


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime_ns) of every file and folder under ``folder`` ({} when absent)."""
    out: dict[str, tuple[int, int]] = {}
    if not folder.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            try:
                st = p.lstat()
            except FileNotFoundError:
                continue
            out[p.relative_to(folder).as_posix()] = (0 if p.is_dir() else st.st_size, st.st_mtime_ns)
    return out


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not _is_worker(session.config):
        session.config.stash[_BEFORE] = _listing(REPO_STATE)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_TEST_STATE, ignore_errors=True)
    if _is_worker(session.config) or _BEFORE not in session.config.stash:
        return
    before, after = session.config.stash[_BEFORE], _listing(REPO_STATE)
    if before != after:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        sys.stderr.write(f"\nERROR: the test run wrote into {REPO_STATE} ({len(changed)} path(s) changed, e.g. "
                         f"{', '.join(changed[:5])}); tests must use tmp paths (DATACHECK_DIR is set to a temporary "
                         "folder for the run: pass no explicit .datacheck path)\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_BEFORE = pytest.StashKey[dict]()


@dataclasses.dataclass
class CliResult:
    """What one CLI call gave: ``returncode``, ``stdout`` and ``stderr`` as text (the attributes of a
    ``subprocess.CompletedProcess`` the tests read), and the ``args`` it ran."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


#: the warning filters of a fresh interpreter (what ``python -m datacheck`` shows on stderr)
_FRESH_WARNING_FILTERS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, None),
                          ("ignore", PendingDeprecationWarning, None), ("ignore", ImportWarning, None),
                          ("ignore", ResourceWarning, None))


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> CliResult:
    """Run ``datacheck ARGS`` in this process through :func:`datacheck.cli.main.main`, as
    ``python -m datacheck ARGS`` would run in ``cwd`` (default: the repository root).

    The call is isolated: ``os.environ`` (``env`` applied on top, a value of None unsets it; what
    ``main`` sets for the CLI process, such as ``OPENBLAS_NUM_THREADS``, is undone), the working
    folder, ``sys.argv`` and the SIGTERM handler are restored afterwards. stdout and stderr are
    captured as text; warnings and the ``datacheck`` logger's records reach the captured stderr as in
    a fresh interpreter. The exit code is ``main``'s return value, or the code of a ``SystemExit``
    (argparse's ``--help``, ``--version`` and usage errors).

    What ``main`` sets for its process and is not undone: glibc's ``mallopt`` thresholds (freed
    blocks kept for reuse; no result depends on them). The BLAS and Arrow pool variables change
    nothing here (numpy and pyarrow are already loaded) and are restored with the environment; a
    closed pipe cannot happen on the captured streams (tests of pipes use :func:`run_cli_subprocess`).
    """
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_sigterm = signal.getsignal(signal.SIGTERM)
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("datacheck")
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        os.chdir(cwd or ROOT)
        sys.argv = ["datacheck", *args]
        logger.addHandler(handler)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.resetwarnings()
            for action, category, module in reversed(_FRESH_WARNING_FILTERS):
                warnings.filterwarnings(action, category=category, module=module or "")
            try:
                rc = main(list(args))
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    err.write(f"{exc.code}\n")
    finally:
        logger.removeHandler(handler)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        if signal.getsignal(signal.SIGTERM) is not saved_sigterm and saved_sigterm is not None:
            signal.signal(signal.SIGTERM, saved_sigterm)
    return CliResult(["datacheck", *args], rc, out.getvalue(), err.getvalue())


def run_cli_subprocess(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                       **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m datacheck ARGS`` as a real process and return the completed process (text
    output). Only for what needs a process of its own: closed pipes, a TTY, signals, the exit code of
    the real entry point, import cost. ``env`` is added to this process's environment."""
    return subprocess.run([sys.executable, "-m", "datacheck", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=600, env={**os.environ, **env} if env else None, **kwargs)


@dataclasses.dataclass(frozen=True)
class CaseAudit:
    """One audit of a shared defect case (``audit CASE/data --config CASE/datacheck.toml --output
    REPORT --report-dir R --no-cache --no-progress --format json``, as ../shared/tools/run_cases.py
    runs it): the exit code, the captured output and the text of the JSON report written to --output
    ("" when none was written)."""

    returncode: int
    stdout: str
    stderr: str
    report: str


class CaseAudits:
    """The shared cases (``../shared/cases/<name>``), each audited once per test run, on first use.

    Under xdist the workers share the results through a folder next to their base temp folders (a
    worker that finds a case's result there reads it; two workers racing on one case both audit it
    and write the same result atomically)."""

    def __init__(self, base: Path, shared: Path | None):
        self._base, self._shared, self._done = base, shared, {}

    def names(self) -> list[str]:
        return sorted(c.name for c in CASES.iterdir() if (c / "expect.json").is_file()) if CASES.is_dir() else []

    def __getitem__(self, name: str) -> CaseAudit:
        if name not in self._done:
            self._done[name] = self._load(name) or self._audit(name)
        return self._done[name]

    def _load(self, name: str) -> CaseAudit | None:
        f = self._shared / f"{name}.json" if self._shared else None
        return CaseAudit(**json.loads(f.read_text())) if f is not None and f.is_file() else None

    def _audit(self, name: str) -> CaseAudit:
        case, tmp = CASES / name, self._base / name
        tmp.mkdir(parents=True, exist_ok=True)
        out = tmp / "report.json"
        p = run_cli("audit", str(case / "data"), "--config", str(case / "datacheck.toml"), "--output", str(out),
                    "--report-dir", str(tmp / "r"), "--no-cache", "--no-progress", "--format", "json")
        got = CaseAudit(p.returncode, p.stdout, p.stderr, out.read_text(encoding="utf-8") if out.is_file() else "")
        if self._shared is not None:
            self._shared.mkdir(parents=True, exist_ok=True)
            part = self._shared / f"{name}.json.{os.getpid()}"
            part.write_text(json.dumps(dataclasses.asdict(got)))
            part.replace(self._shared / f"{name}.json")
        return got


@pytest.fixture(scope="session", autouse=True)
def _config_lookup_stays_in_basetemp(tmp_path_factory: pytest.TempPathFactory) -> None:
    """pytest's base temporary folder (this process's: each xdist worker has its own) holds a ``.jj``
    folder, a repository root to the config lookup (:func:`datacheck.execute.configpath.resolve_config_path`
    checks it and climbs no higher): an audit of a test's tmp data without ``--config`` never uses a
    ``datacheck.toml`` above it (``/tmp/datacheck.toml``, left by a user, changed every such result)."""
    (tmp_path_factory.getbasetemp() / ".jj").mkdir(exist_ok=True)


@pytest.fixture(scope="session")
def case_audits(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> CaseAudits:
    """:class:`CaseAudits`: every shared case audited once per run (skipped when ../shared/cases is absent)."""
    if not CASES.is_dir():
        pytest.skip("../shared/cases is not present")
    base = tmp_path_factory.mktemp("case-audits")
    shared = tmp_path_factory.getbasetemp().parent / "case-audits" if _is_worker(request.config) else None
    return CaseAudits(base, shared)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present")
    return REALDATA


def write_frame(path: Path, df, arrow_stream: bool = False) -> Path:
    """Write ``df`` (a polars DataFrame or a dict of columns) to ``path`` in the format its extension
    names: .parquet, .jsonl, .csv, or .arrow (an IPC file; an IPC stream, as Hugging Face
    ``save_to_disk`` writes, with ``arrow_stream=True``). Creates parent folders."""
    import polars as pl

    if isinstance(df, dict):
        df = pl.DataFrame(df)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    name = path.name
    if name.endswith(".parquet"):
        df.write_parquet(path)
    elif name.endswith(".jsonl"):
        df.write_ndjson(path)
    elif name.endswith(".csv"):
        df.write_csv(path)
    elif name.endswith(".arrow") and arrow_stream:
        import pyarrow as pa

        table = df.to_arrow()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    elif name.endswith(".arrow"):
        df.write_ipc(path)
    else:
        raise ValueError(f"no writer for {name}")
    return path


def load_json(p: Path) -> dict:
    return json.loads(Path(p).read_text())


@pytest.fixture
def ow(tmp_path) -> Path:
    """(e2e robustness) A clean folder of two shards (audit passes; two shards, so the audit makes a spill folder)."""
    d = tmp_path / "ow"
    d.mkdir()
    pl.DataFrame({"text": ["a", "b", "c"], "label": [0, 1, 0]}).write_parquet(d / "validation-00000-of-00001.parquet")
    (d / "train.jsonl").write_text('{"text": "x", "label": 1}\n{"text": "y", "label": 0}\n')
    return d
