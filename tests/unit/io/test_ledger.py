"""trace reads ledgers through the one reader (datacheck.io.ledger.read_ledger): record_batches'
format (micro-batches, resumes) and OLMo's data-indices (gzip'd or plain, tab- or comma-separated)."""
from __future__ import annotations

import gzip
import zlib

import pytest

import datacheck
from datacheck.io.ledger import LEDGER_HEADER, read_ledger
from datacheck.trace.data import ledger_rows


def _write(path, text, gz=True):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())


def test_datacheck_ledger_micro_batches_and_resume(tmp_path):
    d = tmp_path / "run" / "data-indices"
    st0 = '#state\t{"epoch": 0, "start_step": 0}\n'
    st1 = '#state\t{"epoch": 0, "start_step": 1}\n'  # resumed from step 1: the later records replace it
    _write(d / "rank0.tsv.gz", LEDGER_HEADER + "\n" + st0 + "0\t0\t0\t0\t4\t5\n0\t0\t1\t0\t6\n1\t0\t0\t0\t99\n"
           + st1 + "1\t0\t0\t0\t7\t8\n1\t0\t1\t0\t9\n")
    _write(d / "rank1.tsv.gz", LEDGER_HEADER + "\n" + st0 + "0\t1\t0\t0\t1\n0\t1\t1\t0\t2\t3\n1\t1\t0\t0\t10\n")
    assert ledger_rows(tmp_path / "run", [0, 1, 5])[0] == {0: {0: [4, 5, 6], 1: [1, 2, 3]}, 1: {0: [7, 8, 9], 1: [10]}}
    assert ledger_rows(tmp_path / "run", [1])[0] == {1: {0: [7, 8, 9], 1: [10]}}


def test_olmo_ledger_gzip_plain_and_commas(tmp_path):
    _write(tmp_path / "data-indices" / "rank0.tsv.gz", "1\t4\t0\t7\n2\t1\t2\t3\n2\t11\t12\n")  # step 2 again: a resume
    _write(tmp_path / "data-indices" / "rank1.tsv", "1\t5,6,8\n2\t9\t10\n", gz=False)
    assert ledger_rows(tmp_path, [1, 2])[0] == {1: {0: [4, 0, 7], 1: [5, 6, 8]}, 2: {0: [11, 12], 1: [9, 10]}}


def test_bad_ledgers_are_usage_errors(tmp_path):
    with pytest.raises(datacheck.UsageError, match="no rank<r>.tsv.gz file"):
        ledger_rows(tmp_path, [1])
    _write(tmp_path / "rank0.tsv.gz", "1\t4\tx\n")
    with pytest.raises(datacheck.UsageError, match=r"rank0.tsv.gz:1: not a ledger line"):
        ledger_rows(tmp_path, [1])


def test_a_negative_number_in_a_ledger_line_is_a_usage_error_naming_the_line(tmp_path):
    """Steps, ranks and row indices count from 0: a -1 (an edited file, another tool's sentinel) is
    refused at its line, never passed on to the visit counts."""
    d = tmp_path / "data-indices"
    _write(d / "rank0.tsv.gz", LEDGER_HEADER + "\n" + '#state\t{"epoch": 0, "start_step": 0}\n'
           + "0\t0\t0\t0\t4\t5\n1\t0\t0\t0\t-1\t6\n")
    with pytest.raises(datacheck.UsageError, match=r"rank0.tsv.gz:4: not a ledger line: -1 is negative"):
        ledger_rows(tmp_path, [1])
    _write(d / "rank0.tsv.gz", "1\t4\t-7\n")  # OLMo's layout too
    with pytest.raises(datacheck.UsageError, match=r"rank0.tsv.gz:1: not a ledger line: -7 is negative"):
        ledger_rows(tmp_path, [1])


@pytest.mark.parametrize("raw", [b"", gzip.compress(b""), gzip.compress((LEDGER_HEADER + "\n0\t0\t0\t0\t1\n").encode())[:12]],
                         ids=["zero_bytes", "empty_gzip", "first_member_cut"])
def test_a_rank_file_without_a_complete_line_decides_no_format(tmp_path, raw):
    """A rank whose file holds no complete line (it crashed before its first flush ended) is a rank
    with no batch, not an OLMo ledger beside datacheck ones ("mixes ledger formats" was the wrong
    answer); a folder where no file holds a line is a usage error saying so."""
    from datacheck.io.ledger import read_ledger

    d = tmp_path / "data-indices"
    _write(d / "rank1.tsv.gz", LEDGER_HEADER + "\n" + '#state\t{"epoch": 0, "start_step": 0}\n' + "0\t1\t0\t0\t4\t5\n")
    (d / "rank0.tsv.gz").write_bytes(raw)
    led = read_ledger(tmp_path)
    assert led.format == "datacheck"
    assert led.ranks == [0, 1] and led.batches[0] == {} and [b.indices for b in led.batches[1][0]] == [(4, 5)]
    assert led.empty == [str(d / "rank0.tsv.gz")]
    (d / "rank1.tsv.gz").write_bytes(raw)
    with pytest.raises(datacheck.UsageError, match="no ledger file holds a complete line"):
        read_ledger(tmp_path)


def test_a_rank_of_the_run_without_a_ledger_file_is_named_for_the_steps_asked(tmp_path):
    """The #state lines record num_replicas 2 but only rank 0's file is there: the rows of a step are
    half the step's, and trace and plan say which rank recorded nothing (they gave the half silently)."""
    from conftest import run_cli

    d = tmp_path / "data-indices"
    _write(d / "rank0.tsv.gz", LEDGER_HEADER + "\n" + '#state\t{"epoch": 0, "start_step": 0, "num_replicas": 2}\n'
           + "0\t0\t0\t0\t4\t5\n1\t0\t0\t0\t6\t7\n")
    rows, src = ledger_rows(tmp_path, [1])
    assert rows == {1: {0: [6, 7]}}
    assert "step 1: rank(s) 1 recorded no batch of it" in src["gaps"]
    r = run_cli("plan", "--ledger", str(tmp_path), "--step", "1")
    assert r.returncode == 0, r.stderr
    assert "step 1: 2 row(s)" in r.stdout
    assert "rank(s) [1] of the run recorded no batch of step 1: the step's rows are short" in r.stdout


def test_a_torn_single_stream_gzip_ledger_keeps_its_complete_lines(tmp_path):
    """A ledger record_batches wrote, held as one gzip stream (as a rewrite or `zcat | gzip` leaves it),
    cut mid-stream by a crash: every line complete before the cut is read (the deflate stream inflates
    exactly to the cut), not the whole file dropped; the tear is said with its file and byte offset."""
    data = pytest.importorskip("torch.utils.data")
    record_batches = pytest.importorskip("datacheck.torch").record_batches
    BatchSampler, SequentialSampler = data.BatchSampler, data.SequentialSampler
    rows, batch = 1000, 4
    assert len(list(record_batches(BatchSampler(SequentialSampler(range(rows)), batch, False), tmp_path))) == rows // batch
    path = tmp_path / "data-indices" / "rank0.tsv.gz"
    single = gzip.compress(gzip.decompress(path.read_bytes()))  # one member
    cut = single[: len(single) // 2]
    path.write_bytes(cut)
    prefix = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(cut)
    complete = prefix.split(b"\n")[:-1]
    want = sorted({int(line.split(b"\t")[0]) for line in complete if line and not line.startswith(b"#")})
    assert 0 < len(want) < rows // batch
    led = read_ledger(tmp_path)
    assert led.steps == want and led.truncated == [str(path)]
    assert [list(b.indices) for b in led.step(want[-1])] == [list(range(want[-1] * batch, (want[-1] + 1) * batch))]
    tear = led.tears[str(path)]
    assert f"torn at byte {len(cut)} (the end of the file, inside the gzip member from byte 0" in tear
    assert f"the {len(complete)} line(s) before it are read" in tear
    src = ledger_rows(tmp_path, [want[-1]])[1]
    assert f"rank0.tsv.gz ends in a torn write (the run was killed mid-write): torn at byte {len(cut)}" \
        in src["description"]


def test_garbage_between_members_is_corrupt_not_a_torn_write(tmp_path):
    first = gzip.compress(f"{LEDGER_HEADER}\n0\t0\t0\t0\t1\t2\n".encode())
    garbage = b"garbage\xff\x00 not gzip"
    second = gzip.compress(b"1\t0\t0\t0\t3\t4\n")
    (tmp_path / "rank0.tsv.gz").write_bytes(first + garbage + second)
    led = read_ledger(tmp_path)
    assert led.steps == [0]  # what follows the garbage is not read: never guessed from
    tear = led.tears[str(tmp_path / "rank0.tsv.gz")]
    size = len(first) + len(garbage) + len(second)
    assert tear.startswith(f"corrupt at the gzip member from byte {len(first)}, which does not inflate")
    assert f"the {size - len(first)} byte(s) from there to the end of the file (byte {size}) are not read" in tear
    assert f"a gzip member starts again at byte {len(first) + len(garbage)}" in tear
    src = ledger_rows(tmp_path, [0])[1]
    assert "rank0.tsv.gz is corrupt, not a torn write: corrupt at" in src["description"]
    assert "killed mid-write" not in src["description"]


def _carry_ledger(carried: str) -> str:
    """Epoch 0 (3 micro-batches, grad_accum 2) takes step 0 on micro-batches 0-1; its third is trained at step 1
    with no update after it; epoch 1 starts at step 1 (``#state`` start_step 1, before the ``#end``'s next_step
    2) and takes step 1 on the carried micro-batch and its own first two, step 2 on its third."""
    st0 = '#state\t{"epoch": 0, "start_step": 0, "grad_accum": 2, "batches": 3}\n'
    end0 = '#end\t{"epoch": 0, "batches": 3, "epoch_batches": 3, "next_step": 2}\n'
    st1 = '#state\t{"epoch": 1, "start_step": 1, "grad_accum": 2, "batches": 3' + carried + '}\n'
    return (LEDGER_HEADER + "\n" + st0 + "0\t0\t0\t0\t1\t2\n0\t0\t1\t0\t3\t4\n1\t0\t0\t0\t5\t6\n" + end0 + st1
            + "1\t0\t1\t1\t7\t8\n1\t0\t2\t1\t9\t10\n2\t0\t0\t1\t11\n")


def test_micro_batches_carried_into_the_next_epochs_first_step_are_kept(tmp_path):
    """``"carried": 1``: step 1 holds epoch 0's last micro-batch (rows 5, 6) then epoch 1's first two;
    without the key (an older ledger) the ``#state`` line supersedes the record, as before."""
    _write(tmp_path / "new" / "data-indices" / "rank0.tsv.gz", _carry_ledger(', "carried": 1'))
    led = read_ledger(tmp_path / "new")
    assert [(b.micro_batch, b.epoch, list(b.indices)) for b in led.step(1)] == [(0, 0, [5, 6]), (1, 1, [7, 8]),
                                                                                 (2, 1, [9, 10])]
    assert ledger_rows(tmp_path / "new", [0, 1, 2])[0] == {0: {0: [1, 2, 3, 4]}, 1: {0: [5, 6, 7, 8, 9, 10]},
                                                           2: {0: [11]}}
    assert not led.partial
    _write(tmp_path / "old" / "data-indices" / "rank0.tsv.gz", _carry_ledger(""))
    assert ledger_rows(tmp_path / "old", [1])[0] == {1: {0: [7, 8, 9, 10]}}


@pytest.mark.parametrize("carried", [', "carried": 2', ', "carried": true', ', "carried": -1', ', "carried": "1"'])
def test_a_carried_count_the_records_do_not_hold_keeps_nothing(tmp_path, carried):
    """More carried micro-batches than step 1 recorded before the line (2 > 1), or not a positive integer:
    nothing is kept, as an older ledger reads."""
    _write(tmp_path / "run" / "data-indices" / "rank0.tsv.gz", _carry_ledger(carried))
    assert ledger_rows(tmp_path / "run", [1])[0] == {1: {0: [7, 8, 9, 10]}}


def test_a_run_stopped_inside_a_carried_step_is_partial(tmp_path):
    """Step 1 should hold 1 carried + 2 micro-batches; the run stopped after epoch 1's first: 2 of 3."""
    text = _carry_ledger(', "carried": 1').replace("1\t0\t2\t1\t9\t10\n2\t0\t0\t1\t11\n", "")
    _write(tmp_path / "run" / "data-indices" / "rank0.tsv.gz", text)
    assert read_ledger(tmp_path / "run").partial == {0: (1, 2, 3)}


def test_an_untrained_line_takes_its_steps_micro_batches_out_of_the_trained(tmp_path):
    """The run ended after epoch 1's first micro-batch (step 1, its update never taken): ``#untrained``
    says so; the step is not a trained step (nor partial), its micro-batch is in ``untrained``. A later
    ``#state`` at or before that step (a resume) supersedes the mark with the records."""
    st1 = '#state\t{"epoch": 1, "start_step": 1, "grad_accum": 2, "batches": 3}\n'
    head = (LEDGER_HEADER + '\n#state\t{"epoch": 0, "start_step": 0, "grad_accum": 2, "batches": 2}\n'
            "0\t0\t0\t0\t1\t2\n0\t0\t1\t0\t3\t4\n" + st1 + "1\t0\t0\t1\t5\t6\n")
    mark = '#untrained\t{"step": 1, "rank": 0, "micro_batches": 1}\n'
    _write(tmp_path / "a" / "data-indices" / "rank0.tsv.gz", head + mark)
    led = read_ledger(tmp_path / "a")
    assert led.steps == [0] and led.partial == {}
    assert {s: [list(b.indices) for b in bs] for s, bs in led.untrained[0].items()} == {1: [[5, 6]]}
    _write(tmp_path / "b" / "data-indices" / "rank0.tsv.gz", head + mark + st1 + "1\t0\t0\t1\t5\t6\n1\t0\t1\t1\t7\n")
    led = read_ledger(tmp_path / "b")
    assert led.steps == [0, 1] and led.untrained[0] == {}
    assert [list(b.indices) for b in led.step(1)] == [[5, 6], [7]]


def test_a_state_begun_at_the_same_step_supersedes_the_earlier_one_unless_it_carries(tmp_path):
    """A resume whose #state starts at the step an earlier run began epoch 2 at (both start_step 4) replaces
    that #state (its iteration's records went with it); a #state that carries micro-batches of the step it
    starts at keeps the #state before it (whose micro-batches they are)."""
    def st(epoch, start, extra=""):
        return '#state\t{"epoch": %d, "start_step": %d, "grad_accum": 2, "batches": 3%s}\n' % (epoch, start, extra)

    text = (LEDGER_HEADER + "\n" + st(1, 3) + "3\t0\t0\t1\t1\n3\t0\t1\t1\t2\n4\t0\t0\t1\t3\n" + st(2, 4, ', "carried": 1')
            + "4\t0\t1\t2\t4\n" + st(1, 4, ', "skipped": 2') + "4\t0\t0\t1\t3\n" + st(2, 4, ', "carried": 1')
            + "4\t0\t1\t2\t4\n4\t0\t2\t2\t5\n")
    _write(tmp_path / "run" / "data-indices" / "rank0.tsv.gz", text)
    led = read_ledger(tmp_path / "run")
    assert [(s["epoch"], s["start_step"], s.get("skipped"), s.get("carried")) for s in led.states[0]] == \
        [(1, 3, None, None), (1, 4, 2, None), (2, 4, None, 1)]
    assert [(b.epoch, list(b.indices)) for b in led.step(4)] == [(1, [3]), (2, [4]), (2, [5])]
