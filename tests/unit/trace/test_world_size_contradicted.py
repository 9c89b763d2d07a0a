"""``datacheck trace --world-size N`` where the logs or the ledger name a rank >= N (ranks count from
0): the given world size contradicts the run, so trace refuses (exit 2) and names the ranks seen,
instead of answering for a run with other ranks."""
from __future__ import annotations

import gzip
import json

from conftest import run_cli

from datacheck.io.ledger import LEDGER_HEADER

RANKS = [0, 1, 2, 3]


def _logs(tmp_path, ranks):
    out = []
    for r in ranks:
        p = tmp_path / f"rank{r}.jsonl"
        p.write_text("".join(json.dumps({"step": s, "loss": 2.0 - 0.01 * s}) + "\n" for s in range(1, 21)))
        out.append(str(p))
    return out


def test_logs_with_ranks_beyond_the_world_size_are_refused(tmp_path):
    logs = _logs(tmp_path, RANKS)
    ws = 2
    over = [r for r in RANKS if r >= ws]
    r = run_cli("trace", *logs, "--world-size", str(ws))
    assert r.returncode == 2, r.stdout
    assert (f"--world-size is {ws} (ranks 0 .. {ws - 1}), but the logs name rank(s) {', '.join(map(str, over))} "
            f"(ranks seen: {', '.join(map(str, RANKS))}): give the run's world size (at least {max(RANKS) + 1})"
            in r.stderr), r.stderr
    ok = run_cli("trace", *logs, "--world-size", str(len(RANKS)))
    assert ok.returncode == 0 and "--world-size" not in ok.stderr, ok.stderr
    # fewer logged ranks than --world-size stays a finding (ranks unseen), not a refusal
    more = run_cli("trace", *logs, "--world-size", str(len(RANKS) + 2))
    assert more.returncode in (0, 1) and f"ranks {[4, 5]} are not in the logs" in more.stdout, more.stdout


def test_a_ledger_with_ranks_beyond_the_world_size_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "d.jsonl").write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(32)))
    log = _logs(tmp_path, [0])
    d = tmp_path / "run" / "data-indices"
    d.mkdir(parents=True)
    ledger_ranks = [0, 1, 2]
    for r in ledger_ranks:
        lines = [LEDGER_HEADER, '#state\t{"epoch": 0, "start_step": 0}']
        lines += [f"{s}\t{r}\t0\t0\t{4 * (3 * s + r)}\t{4 * (3 * s + r) + 1}" for s in range(2)]
        with gzip.open(d / f"rank{r}.tsv.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    args = ("trace", *log, "--data", str(data), "--ledger", str(tmp_path / "run"), "--step", "1")
    r = run_cli(*args, "--world-size", "2")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert ("--world-size is 2 (ranks 0 .. 1), but the ledger" in r.stderr
            and "records rank(s) 2 (ranks recorded: 0, 1, 2): give the run's world size (at least 3)" in r.stderr), r.stderr
    ok = run_cli(*args, "--world-size", str(len(ledger_ranks)))
    assert ok.returncode in (0, 1) and "--world-size is" not in ok.stderr, ok.stderr
