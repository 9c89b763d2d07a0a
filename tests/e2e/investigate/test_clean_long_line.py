"""``datacheck clean`` of a JSONL shard with a line longer than ``[dataset] max_row_bytes``: the audit
reads the line as a record that does not parse (``decode.bad_record``, never held), and the rewrite,
which holds a shard's records in memory, refuses the shard (exit 2) naming the file, the line, its byte
offset and bytes, before reading it whole (formats/rewrite.py ``_refuse_long_line``); nothing is left
in ``--out``. The line number, offset and length are computed here from the bytes written."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, run_cli


def _data(root: Path, long_bytes: int, gz: bool = False) -> tuple[Path, int, int]:
    """data/a.jsonl: two short records, one of ``long_bytes`` bytes, one short; (folder, the long
    line's 1-based number, its byte offset)."""
    data = root / "data"
    data.mkdir()
    lines = [json.dumps({"text": "short one"}).encode(), json.dumps({"text": "short two"}).encode(),
             b'{"text": "' + b"x" * (long_bytes - 12) + b'"}', json.dumps({"text": "short three"}).encode()]
    assert len(lines[2]) == long_bytes
    raw = b"\n".join(lines) + b"\n"
    if gz:
        import gzip

        (data / "a.jsonl.gz").write_bytes(gzip.compress(raw, compresslevel=1))
    else:
        (data / "a.jsonl").write_bytes(raw)
    return data, 3, len(lines[0]) + len(lines[1]) + 2


def test_clean_refuses_a_line_over_the_bound_naming_it(tmp_path):
    limit = 1 << 20
    long_bytes = limit + 1_000
    data, line, offset = _data(tmp_path, long_bytes)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[dataset]\nmax_row_bytes = {limit}\n")
    out = tmp_path / "out"
    r = run_cli("clean", str(data), "--out", str(out), "--config", str(cfg), "--no-progress")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert f"a.jsonl: line {line} (byte offset {offset:,}) holds {long_bytes:,} bytes" in r.stderr
    assert "[dataset] max_row_bytes" in r.stderr and "Remove the line" in r.stderr
    assert not out.exists() or not any(out.iterdir())
    # raised over the line: cleaned, every record kept (nothing was dropped)
    cfg.write_text(f"[dataset]\nmax_row_bytes = {long_bytes}\n")
    r = run_cli("clean", str(data), "--out", str(out), "--config", str(cfg), "--no-progress", "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    assert (out / "a.jsonl").read_bytes() == (data / "a.jsonl").read_bytes()


def test_a_compressed_shard_is_scanned_as_a_stream(tmp_path):
    limit = 1 << 20
    long_bytes = 2 * limit
    data, line, offset = _data(tmp_path, long_bytes, gz=True)
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[dataset]\nmax_row_bytes = {limit}\n")
    r = run_cli("clean", str(data), "--out", str(tmp_path / "out"), "--config", str(cfg), "--no-progress")
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"a.jsonl.gz: line {line} (byte offset {offset:,}) holds {long_bytes:,} bytes" in r.stderr


_RSS = r"""
import sys
from datacheck.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:
    code = e.code
print("exit", code)
print(next(int(ln.split()[1]) for ln in open("/proc/self/status") if ln.startswith("VmHWM:")) // 1024)
"""  # VmHWM: the peak of this process' own memory (ru_maxrss is inherited from the forking parent)


def _peak(data: Path, out: Path, cfg: Path) -> tuple[int, int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", _RSS, "clean", str(data), "--out", str(out), "--no-progress",
                        "--config", str(cfg)], capture_output=True, text=True, env=env, timeout=300, cwd=data.parent)
    lines = p.stdout.strip().splitlines()
    return int(lines[-2].split()[1]), int(lines[-1]), p.stderr


def test_peak_memory_of_a_refused_long_line_does_not_grow_with_it(tmp_path):
    """Lines of 64 and 160 MiB over a bound of 4 MiB, each cleaned in a child process: refused (exit 2)
    at peaks less than 16 MiB apart, the extra 96 MiB of the line never held (before, the rewrite read
    the shard whole, split, decoded and parsed it: 1,291 MiB peak for a 96 MiB line, then an internal
    error; 214 MiB now)."""
    cfg = tmp_path / "datacheck.toml"
    cfg.write_text(f"[dataset]\nmax_row_bytes = {4 << 20}\n")
    peaks = []
    for mib in (64, 160):
        (tmp_path / str(mib)).mkdir()
        data, line, _ = _data(tmp_path / str(mib), mib << 20)
        code, peak, err = _peak(data, tmp_path / str(mib) / "out", cfg)
        assert code == 2 and f"line {line} (byte offset" in err and f"holds {mib << 20:,} bytes" in err, err[-2000:]
        peaks.append(peak)
        (data / "a.jsonl").unlink()
    assert peaks[1] - peaks[0] < 16, peaks
