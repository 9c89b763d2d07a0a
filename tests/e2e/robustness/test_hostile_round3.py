"""Hostile inputs of the MDS, WebDataset and litdata readers, trace logs, ledgers, chat templates,
tokenizers, user schemas and config values (:mod:`hostilegen` builds each from scratch): every one
ends in exit 0, 1 or 2, with no traceback, within a time bound and under a 2 GiB address-space
limit (``RLIMIT_AS``: a reader that allocates what a header declares fails here), and leaves every
byte of the data as it was. Each runs ``python -m datacheck`` in a process of its own (a native
crash, a hang or a memory bomb of one case cannot hide another)."""
from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from hostilegen import CASES

#: address space of each datacheck process (bytes): far below what any bomb here declares (3 GB to 1 TB)
LIMIT_AS = 2 << 30
#: the same for the cases that load a tokenizer: transformers imports torch, and the process maps
#: ~1.95 GiB before it reads a byte (measured: the tokenizer fails to load at 1.9 GiB, a native crash
#: came at 2.0 GiB); 3 GiB still stops every bomb of these cases (3 GB on top of that)
LIMIT_AS_TRANSFORMERS = 3 << 30
#: seconds a case may take (a hang is a failure, not a wait)
TIMEOUT_S = 120

#: the cases whose data takes seconds to write (GB-sized streams compressed here)
_SLOW = {"mds_zstd_bomb", "wds_targz_zero_3e9", "ledger_newline_bomb", "trace_state_huge_string"}


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink() or not p.is_file():
            out[p.relative_to(root).as_posix()] = "link" if p.is_symlink() else ("dir" if p.is_dir() else "special")
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 24), b""):
                h.update(chunk)
        out[p.relative_to(root).as_posix()] = h.hexdigest()
    return out


def _loads_tokenizer(case: str) -> bool:
    return case.startswith("chat_") or "tokenizer" in case or "remote_code" in case


def run_limited(argv: list[str], cwd: Path, stdin: str = "", limit_as: int = LIMIT_AS) -> tuple[int, str, str, float]:
    """``python -m datacheck ARGV`` under ``limit_as`` bytes of address space and :data:`TIMEOUT_S`
    (stdin given, so a prompt would read it). (exit code, stdout, stderr, seconds)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
        os.setsid()

    t0 = time.monotonic()
    # polars' pool of 4 threads, not one per core: each thread's stack and allocator arenas take address space,
    # and with polars' default (one thread per core) a 256-core machine alone passed the limit (a Rust
    # panic, "memory allocation of 8388608 bytes failed", in an audit of a 5,000-row shard)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATACHECK_NO_PROGRESS": "1", "POLARS_MAX_THREADS": "4"}
    p = subprocess.run([sys.executable, "-m", "datacheck", *argv], input=stdin, capture_output=True, text=True,
                       cwd=cwd, timeout=TIMEOUT_S, env=env, preexec_fn=limit)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_input_is_a_finding_or_usage_error(case, tmp_path):
    root = tmp_path / case
    root.mkdir()
    argv = CASES[case](root)
    data = root / "data"
    before = _snapshot(data)
    rc, out, err, secs = run_limited(argv, cwd=root, stdin="y\ny\n",
                                     limit_as=LIMIT_AS_TRANSFORMERS if _loads_tokenizer(case) else LIMIT_AS)
    assert rc in (0, 1, 2), f"exit {rc} in {secs:.1f}s\n{err[-3000:]}"
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    assert _snapshot(data) == before, "the audited data changed"
    assert not (root / "ran").exists(), "code from the data ran"
    if rc == 2:
        assert err.strip(), "a usage error says why"
    _expect(case, rc, out, err)


def _report(out: str) -> dict:
    return json.loads(out)


def _findings(rep: dict, check: str) -> list[dict]:
    return [f for s in rep.get("shards", []) for f in s.get("findings", []) if f["check"] == check]


def _expect(case: str, rc: int, out: str, err: str) -> None:
    """What each case must say besides ending well."""
    if case.startswith("mds_"):
        rep = _report(out)
        got = _findings(rep, "decode.unreadable") + _findings(rep, "decode.bad_record")
        assert got, out[-2000:]
    elif case.startswith("wds_"):
        rep = _report(out)
        got = _findings(rep, "decode.unreadable") + _findings(rep, "decode.bad_record")
        assert got, out[-2000:]
        if case != "wds_name_0xff":
            assert any("0.txt" in json.dumps(f) for f in got), got
    elif case.startswith("fifo_"):
        rep = _report(out)
        reasons = [i for i in rep["ignored"] if "not a regular file" in i["reason"]]
        assert reasons, rep["ignored"]
    elif case.startswith("user_fifo_"):
        assert rc == 2 and "not a regular file" in err, err
    elif case == "found_config_tokenizer_outside":
        assert rc == 2 and "tokens.tokenizer" in err and "outside" in err, err
    elif case in ("found_config_tokenizer", "named_config_remote_code"):
        # the tokenizer's code is refused (trust_remote_code=False), without a prompt
        assert rc == 2 and "tokenizer" in err and "[y/N]" not in err + out, err
        assert "custom code" in err, err  # transformers' reason, not a load that failed for want of memory
    elif case.startswith(("schema_", "cfg_batch_size", "cfg_world_size", "cfg_epochs", "cfg_template_ids",
                          "cfg_index")):
        assert rc == 2, err
    elif case == "chat_range_nested":  # a bound on every conversation: the template is refused, not each row
        assert rc == 2 and "the chat template ran past its bounds" in err, err
        assert "on each of the first 3 conversations" in err, err
    elif case.startswith("chat_"):
        rep = _report(out)
        assert rc == 1 and _findings(rep, "sft.role_order"), out[-2000:]
    elif case.startswith("ledger_") and case != "ledger_state_start_step_5000":
        assert rc == 2 and "ledger" in err, err


#: inputs of the fuzz campaign (benchmarks/fuzz_inputs.py, seed 1) that once ended in a traceback:
#: index -> target (a corrupt deflate block in a WebDataset ``.json.gz`` member; a parquet footer
#: counting rows its row groups do not decode to)
CAMPAIGN_FINDS = {2237: "wds_tar", 2670: "parquet"}
#: the targets that campaign cycled over (the ``dataset_card`` target came later)
CAMPAIGN_TARGETS_LEFT_OUT = ("dataset_card",)


@pytest.mark.slow
def test_campaign_finds_stay_fixed(tmp_path):
    from fuzzlib import TARGETS, _lay_out, make_seeds, mutants

    seeds = tmp_path / "seed"
    make_seeds(seeds)
    then = [t for t in TARGETS if t[0] not in CAMPAIGN_TARGETS_LEFT_OUT]
    for k, target, rel, data in mutants(max(CAMPAIGN_FINDS) + 1, 1, seeds, then):
        if k not in CAMPAIGN_FINDS:
            continue
        assert target == CAMPAIGN_FINDS[k], "the fuzz corpus changed: update CAMPAIGN_FINDS"
        case, work = tmp_path / f"case{k}", tmp_path / f"work{k}"
        _before, argv = _lay_out(seeds, case, work, target, rel, data)
        rc, out, err, _secs = run_limited(argv, cwd=tmp_path)
        assert rc in (0, 1, 2) and "Traceback" not in err, (k, target, err[-2000:])
