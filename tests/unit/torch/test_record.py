"""record_batches keeps every recorded micro-batch: a step's lines are on disk as soon as its last
micro-batch is yielded, the rest at exit (a loop that stops with its iterator still referenced), at
garbage collection and through ``flush_ledgers``; a cut step or a torn write is named when read.
The yielded batches carry their step and micro-batch into DataLoader workers (BatchGuard's names)."""
from __future__ import annotations

import gc
import gzip
import json
import os
import subprocess
import sys
import textwrap
import warnings
import zlib
from pathlib import Path

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler  # noqa: E402

import datacheck.torch.record as record_mod  # noqa: E402
from datacheck.io.ledger import rank_file, read_ledger  # noqa: E402
from datacheck.model.errors import UsageError  # noqa: E402
from datacheck.torch import BatchGuard, record_batches  # noqa: E402
from datacheck.torch.record import flush_ledgers  # noqa: E402
from datacheck.trace.data import ledger_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _micro(led, rank=0):
    return [(b.step, b.micro_batch, list(b.indices)) for s in sorted(led.batches[rank]) for b in led.batches[rank][s]]


@pytest.mark.slow  # a fresh interpreter that imports torch
def test_a_loop_that_stops_early_keeps_every_recorded_batch(tmp_path):
    # 16 batches of 4 rows, grad_accum 2; the loop takes 5 batches and the process exits normally with the
    # iterator still referenced (a trainer stopping at max_steps): the ledger holds all 5, the cut step named
    script = textwrap.dedent(f"""
        import torch
        from torch.utils.data import DataLoader
        from datacheck.torch import record_batches
        loader = record_batches(DataLoader(list(range(64)), batch_size=4), {str(tmp_path)!r}, grad_accum=2)
        it = iter(loader)
        got = [next(it) for _ in range(5)]
        print("took", len(got))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "took 5" in r.stdout, r.stderr
    assert "Exception ignored" not in r.stderr
    led = read_ledger(tmp_path)
    assert _micro(led) == [(k // 2, k % 2, list(range(4 * k, 4 * k + 4))) for k in range(5)]
    assert led.partial == {0: (2, 1, 2)} and led.truncated == []
    rows, src = ledger_rows(tmp_path, [2, 3])
    assert rows == {2: {0: [16, 17, 18, 19]}}
    assert "rank 0 recorded 1 of 2 micro-batches of step 2" in src["description"]
    assert "step(s) 3 not recorded" in src["description"]


def test_each_step_is_on_disk_before_the_next_is_yielded(tmp_path):
    rec = record_batches(BatchSampler(SequentialSampler(range(30)), 3, False), tmp_path, grad_accum=3)
    seen = []
    for k, batch in enumerate(rec):
        seen.append(list(batch))
        on_disk = _micro(read_ledger(tmp_path))
        complete = (k + 1) // 3 * 3  # micro-batches of the steps completed so far
        assert len(on_disk) >= complete and on_disk[:complete] == [(i // 3, i % 3, seen[i]) for i in range(complete)]
    led = read_ledger(tmp_path)
    assert led.steps == [0, 1, 2, 3] and led.partial == {}  # 10 batches: step 3 is the epoch's 1-batch remainder


def test_flush_ledgers_and_garbage_collection_write_a_cut_step(tmp_path):
    rec = record_batches(BatchSampler(SequentialSampler(range(20)), 2, False), tmp_path / "a", grad_accum=4)
    it = iter(rec)
    for _ in range(3):
        next(it)
    assert rec.pending == 3 and _micro(read_ledger(tmp_path / "a")) == []  # step 0 is not complete yet
    assert flush_ledgers() >= 1 and rec.pending == 0
    assert [m for _, m, _ in _micro(read_ledger(tmp_path / "a"))] == [0, 1, 2]
    rec2 = record_batches(BatchSampler(SequentialSampler(range(20)), 2, False), tmp_path / "b", grad_accum=4)
    it2 = iter(rec2)
    next(it2)
    del it2, rec2  # collected mid-step: what the recorder held is written
    gc.collect()
    assert _micro(read_ledger(tmp_path / "b")) == [(0, 0, [0, 1])]


def test_a_torn_write_is_named(tmp_path):
    rec = record_batches(BatchSampler(SequentialSampler(range(12)), 2, False), tmp_path, grad_accum=1)
    assert len(list(rec)) == 6
    path = rank_file(tmp_path, 0)
    raw = path.read_bytes()
    m = gzip.compress(b"6\t0\t0\t0\t12\t13\n")
    # a write cut mid-member, inside its line (the longest cut that inflates to no newline): the line is dropped
    k = max(k for k in range(len(m)) if b"\n" not in zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(m[:k]))
    path.write_bytes(raw + m[:k])
    led = read_ledger(tmp_path)
    assert led.truncated == [str(path)] and led.steps == [0, 1, 2, 3, 4, 5]
    _, src = ledger_rows(tmp_path, [5])
    assert f"rank0.tsv.gz ends in a torn write (the run was killed mid-write): torn at byte {len(raw) + k} (the end " \
           f"of the file, inside the gzip member from byte {len(raw)}: its last line is cut and dropped)" in src["description"]


@pytest.mark.parametrize("record", [True, False])
def test_guard_under_workers_names_each_batch_once(tmp_path, record):
    # 8 batches of 8 rows, a NaN in each, loaded by 2 workers: 8 dumps, 8 distinct names; recorded: the
    # ledger's step and micro-batch (grad_accum 2), else the batch's position in the loader's order
    x = torch.zeros(64, 2)
    for k in range(8):
        x[8 * k + 3, 0] = float("nan")
    data = [{"x": x[i]} for i in range(64)]
    g = BatchGuard(on_error="warn", dump_dir=tmp_path / "dumps", rank=1)
    loader = DataLoader(data, batch_size=8, num_workers=2, collate_fn=g)
    if record:
        loader = record_batches(loader, tmp_path / "run", rank=1, grad_accum=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = list(loader)
    assert len(batches) == 8
    names = [f"batch-r1-s{k // 2:07d}-m{k % 2}-e0.pt" if record else f"batch-r1-w{k % 2}-{k:06d}.pt" for k in range(8)]
    assert sorted(p.name for p in (tmp_path / "dumps").iterdir()) == sorted(names)
    for k, name in enumerate(names):
        meta = torch.load(tmp_path / "dumps" / name, weights_only=True)["meta"]
        assert meta["batch"] == k and meta["worker"] == k % 2 and meta["failures"] == {"finite.nan": [3]}
        assert torch.load(tmp_path / "dumps" / name, weights_only=True)["tensors"]["x"][3, 0].isnan()
        if record:
            assert meta["tag"] == {"rank": 1, "epoch": 0, "step": k // 2, "micro_batch": k % 2, "position": k}
            assert meta["where"].startswith(f"step {k // 2} micro-batch {k % 2} (rank 1, epoch 0")
    if record:
        assert _micro(read_ledger(tmp_path / "run"), rank=1) == [(k // 2, k % 2, list(range(8 * k, 8 * k + 8)))
                                                                 for k in range(8)]


def test_guard_in_process_keeps_its_failures_and_never_overwrites(tmp_path):
    x = torch.zeros(8, 2)
    x[5, 1] = float("inf")
    g = BatchGuard(on_error="warn", dump_dir=tmp_path)
    loader = record_batches(DataLoader([{"x": r} for r in x], batch_size=4, collate_fn=g), tmp_path / "run")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):  # two epochs: the same step name is not overwritten
            list(loader)
    assert [str(m.message).split(" fails")[0] for m in w] == [
        "step 1 micro-batch 0 (rank 0, epoch 0, batch 1 of the epoch)",
        "step 3 micro-batch 0 (rank 0, epoch 1, batch 1 of the epoch)"]
    assert [f["tag"]["step"] for f in g.failures] == [1, 3] and g.failures[0]["checks"] == {"finite.inf": [1]}
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["batch-r0-s0000001-m0-e0.pt", "batch-r0-s0000003-m0-e1.pt"]


def test_plan_ledger_says_the_cut_step(tmp_path):
    rec = record_batches(BatchSampler(SequentialSampler(range(20)), 2, False), tmp_path, grad_accum=4)
    it = iter(rec)
    for _ in range(6):  # step 0 complete, step 1 holds 2 of 4 micro-batches
        next(it)
    rec.flush()
    r = run_cli("plan", "--ledger", str(tmp_path))
    assert r.returncode == 0 and "rank 0: its last step 1 has 2 of 4 micro-batches recorded" in r.stdout
    r = run_cli("plan", "--ledger", str(tmp_path), "--format", "json")
    led = json.loads(r.stdout)["result"]["ledger"]
    assert led["partial"] == {"0": {"step": 1, "recorded": 2, "micro_batches": 4}} and led["truncated"] == []


def test_members_larger_than_a_read_slice_and_a_torn_one(tmp_path):
    # steps of 40,000 indices compress to members of well over 64 KiB: each is fed to zlib in slices
    rec = record_batches(BatchSampler(torch.randperm(120_000, generator=torch.Generator().manual_seed(1)).tolist(),
                                      40_000, False), tmp_path)
    want = [list(b) for b in rec]
    path = rank_file(tmp_path, 0)
    assert max(len(gzip.compress(" ".join(map(str, w)).encode())) for w in want) > 1 << 16
    assert [list(b.indices) for s in range(3) for b in read_ledger(tmp_path).batches[0][s]] == want
    raw = path.read_bytes()
    path.write_bytes(raw[:-100])  # the last member cut: the first two steps are kept, the cut named
    led = read_ledger(tmp_path)
    assert led.steps == [0, 1] and led.truncated == [str(path)]


def test_workers_prefetch_is_not_recorded_only_the_batches_the_loop_received(tmp_path):
    """num_workers 2 (prefetch_factor 2: 4 batches fetched ahead); the loop takes 8 micro-batches of 4 rows
    (grad_accum 2: steps 0-3) and breaks: the ledger holds exactly those 8, and a recorder opened next on
    the folder continues at step 8 // 2 = 4."""
    loader = record_batches(DataLoader(list(range(64)), batch_size=4, num_workers=2, prefetch_factor=2),
                            tmp_path, grad_accum=2)
    got = []
    for batch in loader:
        got.append(batch.tolist())
        if len(got) == 8:
            break
    del batch
    gc.collect()
    led = read_ledger(tmp_path)
    assert _micro(led) == [(k // 2, k % 2, list(range(4 * k, 4 * k + 4))) for k in range(8)]
    assert [idx for _s, _m, idx in _micro(led)] == got
    again = record_batches(DataLoader(list(range(64)), batch_size=4), tmp_path, grad_accum=2)
    first = next(iter(again))
    assert first.tolist() == [0, 1, 2, 3]
    flush_ledgers()
    led = read_ledger(tmp_path)
    assert led.states[0][-1]["start_step"] == 4 and sorted(led.batches[0]) == [0, 1, 2, 3, 4]


def test_skip_first_batches_then_record_records_only_the_trained_batches(tmp_path):
    """accelerate's skip_first_batches on a plain DataLoader, then record_batches on what it returns with the
    resumed step: the 4 skipped micro-batches (steps 0-1 under grad_accum 2) are never recorded; the
    other order (record, then skip) warns that skipped batches are recorded."""
    accelerate_dl = pytest.importorskip("accelerate.data_loader")
    skipped = accelerate_dl.skip_first_batches(DataLoader(list(range(32)), batch_size=4), 4)
    loader = record_batches(skipped, tmp_path / "right", grad_accum=2, start_step=2)
    got = [b.tolist() for b in loader]
    assert got == [list(range(4 * k, 4 * k + 4)) for k in range(4, 8)]
    led = read_ledger(tmp_path / "right")
    assert _micro(led) == [(2 + (k - 4) // 2, k % 2, list(range(4 * k, 4 * k + 4))) for k in range(4, 8)]
    wrong = accelerate_dl.skip_first_batches(record_batches(DataLoader(list(range(32)), batch_size=4),
                                                            tmp_path / "wrong"), 4)
    with pytest.warns(UserWarning, match="skip_first_batches"):
        assert len([b for b in wrong]) == 4


def test_the_same_loader_iterated_again_continues_after_the_batches_received(tmp_path):
    """num_workers 2, grad_accum 2: the loop takes 3 micro-batches (step 0, and step 1's first) and breaks; the
    next iteration of the same loader starts at step 2 (a step cut short is not continued), not after the
    batches the workers had prefetched."""
    loader = record_batches(DataLoader(list(range(64)), batch_size=4, num_workers=2), tmp_path, grad_accum=2)
    for k, _b in enumerate(loader):
        if k == 2:
            break
    gc.collect()
    it = iter(loader)
    first = next(it)
    assert first.tolist() == [0, 1, 2, 3]
    del it
    gc.collect()
    flush_ledgers()
    led = read_ledger(tmp_path)
    assert [st["start_step"] for st in led.states[0]] == [0, 2]
    assert _micro(led) == [(0, 0, [0, 1, 2, 3]), (0, 1, [4, 5, 6, 7]), (1, 0, [8, 9, 10, 11]), (2, 0, [0, 1, 2, 3])]


@pytest.fixture
def accelerate_state():
    """accelerate's process-wide state, reset after the test (``prepare_data_loader`` creates it)."""
    state = pytest.importorskip("accelerate.state")
    yield
    state.PartialState._reset_state()


def _shard(dl, processes: int, index: int, **kw):
    """``accelerator.prepare``'s loader for process ``index`` of ``processes`` (accelerate's own function)."""
    from accelerate.data_loader import prepare_data_loader
    kw.setdefault("put_on_device", bool(kw.get("dispatch_batches")))
    return prepare_data_loader(dl, num_processes=processes, process_index=index, **kw)


@pytest.mark.parametrize("index", [0, 1])
def test_record_of_an_accelerate_prepared_loader_records_this_process_share(tmp_path, accelerate_state, index):
    """record_batches(accelerator.prepare(loader)): process ``index`` of 2 trains on global batches
    ``index, index + 2, ...`` (BatchSamplerShard) and records exactly those under rank ``index``, steps
    counted over its own micro-batches; the loader stays accelerate's (it sets the sampler's epoch)."""
    from torch.utils.data import DistributedSampler
    n, b = 64, 4
    sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=3)
    loader = record_batches(_shard(DataLoader(list(range(n)), batch_size=b, sampler=sampler), 2, index), tmp_path,
                            grad_accum=2)
    assert type(loader).__mro__[1].__name__ == "DataLoaderShard"
    for epoch in range(2):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(3 + epoch)).tolist()
        want = [order[i:i + b] for i in range(0, n, b)][index::2]
        assert [x.tolist() for x in loader] == want
    led = read_ledger(tmp_path)
    assert list(led.batches) == [index]
    mine = [(k // 2, k % 2, w) for epoch in range(2) for k, w in
            enumerate([torch.randperm(n, generator=torch.Generator().manual_seed(3 + epoch)).tolist()[i:i + b]
                       for i in range(0, n, b)][index::2], start=8 * epoch)]
    assert _micro(led, index) == mine


def test_record_of_an_accelerate_loader_refuses_another_rank_and_dispatch(tmp_path, accelerate_state):
    dl = DataLoader(list(range(16)), batch_size=4)
    with pytest.raises(UsageError, match="process_index 1"):
        record_batches(_shard(dl, 2, 1), tmp_path, rank=0)
    with pytest.raises(UsageError, match="dispatch_batches=False"):
        record_batches(_shard(dl, 1, 0, dispatch_batches=True), tmp_path)


def test_prepare_of_the_recording_loader_is_refused_over_several_processes(tmp_path, accelerate_state, monkeypatch):
    """accelerator.prepare(record_batches(loader)): accelerate iterates the recording sampler inside its
    BatchSamplerShard, so each process would record both processes' batches: refused at the first
    iteration over 2 processes, naming the order to use; warned in one process."""
    rec = record_batches(DataLoader(list(range(16)), batch_size=4), tmp_path)
    with pytest.warns(UserWarning, match=r"record_batches\(accelerator.prepare\(loader\), folder\)"):
        assert len(list(_shard(rec, 1, 0))) == 4
    monkeypatch.setattr(record_mod, "_accelerate_processes", lambda: 2)
    rec = record_batches(DataLoader(list(range(16)), batch_size=4), tmp_path / "two")
    with pytest.raises(UsageError, match=r"record_batches\(accelerator.prepare\(loader\), folder\)"):
        list(_shard(rec, 2, 1))
    assert not rank_file(tmp_path / "two", 0).exists()


@pytest.mark.parametrize("index", [0, 1])
def test_skip_first_batches_of_a_prepared_loader_records_under_its_process_index(tmp_path, accelerate_state, index):
    """A resume: record_batches(skip_first_batches(prepared, 3), start_step=3) records process ``index``'s
    batches after its first 3, under rank ``index`` (its SkipBatchSampler hides the BatchSamplerShard's
    process_index one level down), and its #state names accelerate's loader and the skipped batches."""
    from accelerate.data_loader import skip_first_batches
    from torch.utils.data import DistributedSampler
    n, b = 40, 4
    sampler = DistributedSampler(list(range(n)), num_replicas=1, rank=0, shuffle=True, seed=3)
    dl = _shard(DataLoader(list(range(n)), batch_size=b, sampler=sampler), 2, index)
    loader = record_batches(skip_first_batches(dl, 3), tmp_path, start_step=3)
    order = torch.randperm(n, generator=torch.Generator().manual_seed(3)).tolist()
    want = [order[i:i + b] for i in range(0, n, b)][index::2][3:]
    assert [x.tolist() for x in loader] == want
    led = read_ledger(tmp_path)
    assert list(led.batches) == [index]
    assert _micro(led, index) == [(3 + k, 0, w) for k, w in enumerate(want)]
    st = led.states[index][0]
    assert (st["loader"], st["num_replicas"], st["process_index"], st["rank"], st["skip_batches"], st["batch_size"],
            st["seed"], st["shuffle"], st["even_batches"], st["split_batches"]) == (
        "accelerate", 2, index, index, 3, b, 3, True, True, False)


def test_a_new_recorder_after_an_epoch_ending_mid_step_starts_the_next_step(tmp_path):
    """7 micro-batches of 4 rows under grad_accum 2: the epoch's last step (3) holds one micro-batch and is
    complete (the trainer steps on the remainder), so the next recorder on the folder starts at step 4; a run
    cut inside a step (5 of the 7 micro-batches) is still continued at that step's start."""
    bs = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(28)), batch_size=4, drop_last=False)
    list(record_batches(bs, tmp_path / "whole", grad_accum=2))
    nxt = record_batches(bs, tmp_path / "whole", grad_accum=2)
    assert nxt.next_step == -(-7 // 2) == 4
    it = iter(record_batches(bs, tmp_path / "cut", grad_accum=2))
    for _ in range(5):
        next(it)
    it.close()
    assert record_batches(bs, tmp_path / "cut", grad_accum=2).next_step == 5 // 2


class _Rows(torch.utils.data.IterableDataset):
    """Six rows from the dataset's own iterator: no sampler draws their indices."""

    def __iter__(self):
        return iter(range(6))


def test_a_loader_over_an_iterable_dataset_is_refused_naming_why(tmp_path):
    # torch gives such a loader a BatchSampler over _InfiniteConstantSampler: its batches are [None] * 2,
    # which the recorder once took for indices (TypeError at the first batch)
    loader = DataLoader(_Rows(), batch_size=2)
    assert loader.batch_sampler is not None and next(iter(loader.batch_sampler)) == [None, None]
    with pytest.raises(UsageError, match=r"IterableDataset \(_Rows\).*no row indices to record"):
        record_batches(loader, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_loader_without_batches_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no batch sampler"):
        record_batches(DataLoader(list(range(4)), batch_size=None), tmp_path / "run")


def test_a_random_sampler_s_generator_state_is_recorded_as_its_draw_sees_it(tmp_path):
    """DataLoader(shuffle=True, generator=g): the RandomSampler draws its randperm from g itself, after the
    loader's iterator drew its workers' base seed from g. The #state line's sampler_generator_state, decoded
    (base64, zlib), is g's state at that draw: randperm(50) of a generator set to it is the rows the loop
    received, epoch by epoch; g moves as it does unrecorded."""
    import base64

    g = torch.Generator().manual_seed(3)
    loader = record_batches(DataLoader(list(range(50)), batch_size=4, shuffle=True, generator=g), tmp_path)
    seen = [[i for b in loader for i in b.tolist()] for _ in range(2)]
    flush_ledgers()
    plain_g = torch.Generator().manual_seed(3)
    plain = [[i for b in DataLoader(list(range(50)), batch_size=4, shuffle=True, generator=plain_g) for i in b.tolist()]
             for _ in range(2)]
    assert seen == plain and torch.equal(g.get_state(), plain_g.get_state())
    states = read_ledger(tmp_path).states[0]
    for st, rows in zip(states, seen):
        raw = zlib.decompress(base64.b64decode(st["sampler_generator_state"]))
        again = torch.Generator()
        again.set_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        assert torch.randperm(50, generator=again).tolist() == rows
        assert "sampler_seed" not in st


def test_no_draw_is_recorded_for_a_sampler_that_draws_otherwise(tmp_path):
    """A RandomSampler with replacement, a subclass with its own __iter__, a SequentialSampler: no
    sampler_seed / sampler_generator_state (their order is not a RandomSampler's permutation)."""
    from torch.utils.data import RandomSampler

    class Reversed(RandomSampler):
        def __iter__(self):
            return iter(range(len(self.data_source) - 1, -1, -1))

    data = list(range(10))
    for i, sampler in enumerate([RandomSampler(data, replacement=True), Reversed(data), SequentialSampler(data)]):
        rec = record_batches(BatchSampler(sampler, 4, drop_last=False), tmp_path / str(i))
        list(rec)
        flush_ledgers()
        st = read_ledger(tmp_path / str(i)).states[0][0]
        assert not [k for k in st if k in ("sampler_seed", "sampler_generator_state")], st
