"""``datacheck order verify`` on ledgers of tiny recorded runs: torch's ``DistributedSampler`` +
``BatchSampler`` iterated through ``record_batches``' recording batch sampler, with a crash and a resume
done right (the loader skips the batches already trained, as ``skip_first_batches`` does) and wrong
(the epoch's order restarts; the world size changes; two ranks resume at different positions). The
rows seen twice and never are counted by hand from the sampler's arithmetic: ``DistributedSampler``
shuffles with ``torch.randperm(n, generator seeded seed + epoch)`` and rank ``r`` of ``w`` takes
``perm[r::w]`` (no padding when ``w`` divides ``n``)."""
from __future__ import annotations

import base64
import gzip
import json
import zlib

import numpy as np
import pytest
from conftest import run_cli

from datacheck.io.ledger import read_ledger
from datacheck.resume.order import verify_order

torch = pytest.importorskip("torch")
from datacheck.torch.record import RecordingBatchSampler  # noqa: E402

N, BS, SEED = 24, 2, 0


class _Rows:
    def __len__(self):
        return N


class SkipFirst:
    """A batch sampler that skips its first ``k`` batches (accelerate's ``skip_first_batches``); with
    ``show=False`` it shows none of its inner sampler's settings (accelerate's ``SkipBatchSampler``:
    the recorder writes them as null)."""

    def __init__(self, inner, k, show=True):
        self.inner, self.k = inner, k
        if show:
            self.sampler, self.batch_size, self.drop_last = inner.sampler, inner.batch_size, inner.drop_last

    def __iter__(self):
        for i, b in enumerate(self.inner):
            if i >= self.k:
                yield b

    def __len__(self):
        return len(self.inner) - self.k


def segment(folder, *, world, rank, epoch=0, skip=0, steps, start_step=None, grad_accum=1, batch=BS):
    """Record ``steps`` batches of ``batch`` rows of rank ``rank`` of ``world`` in ``epoch``, after skipping
    ``skip``."""
    s = torch.utils.data.DistributedSampler(_Rows(), num_replicas=world, rank=rank, shuffle=True, seed=SEED)
    s.set_epoch(epoch)
    bs = torch.utils.data.BatchSampler(s, batch, drop_last=False)
    rec = RecordingBatchSampler(SkipFirst(bs, skip), folder, rank=rank, start_step=start_step, grad_accum=grad_accum)
    it = iter(rec)
    for _ in range(steps):
        next(it)
    it.close()  # the recorder flushes in its finally


def perm(epoch=0):
    g = torch.Generator()
    g.manual_seed(SEED + epoch)
    return torch.randperm(N, generator=g).tolist()


def verify(folder, rows=N):
    return verify_order(read_ledger(folder), None, rows)


def test_a_clean_resume_is_the_continuation(tmp_path):
    spe = N // BS  # 12 steps per epoch on one rank
    segment(tmp_path, world=1, rank=0, steps=5)                              # steps 0-4, then a crash
    segment(tmp_path, world=1, rank=0, skip=5, steps=spe - 5, start_step=5)  # resumed: batches 5..11
    segment(tmp_path, world=1, rank=0, epoch=1, steps=3)                     # epoch 1: steps 12-14
    v = verify(tmp_path)
    assert v.findings == [] and v.first_divergent_step is None
    assert [(s["kind"], s["order"]) for s in v.segments] == [("start", "start"), ("resume", "continuation"),
                                                             ("epoch", "continuation")]
    assert v.seen_twice["count"] == 0 and v.never_seen == {"count": 0, "rows": [], "by_epoch": {},
                                                           "completed_epochs": [0]}
    r = run_cli("order", "verify", str(tmp_path), "--rows", str(N), "--format", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["kind"] == "datacheck.order.verify"
    assert doc["result"]["first_divergent_step"] is None and doc["result"]["passed"] is True


def test_a_resume_that_restarts_the_epoch(tmp_path):
    """transgenic #59's shape: the resumed loader starts the epoch again at step 5."""
    done, spe = 5, N // BS
    segment(tmp_path, world=1, rank=0, steps=done)
    segment(tmp_path, world=1, rank=0, steps=spe - done, start_step=done)  # batches 0..6 again, as steps 5..11
    p = perm()
    twice = sorted(p[: done * BS])                       # batches 0..4 trained in both segments
    never = sorted(p[(spe - done) * BS:])                # batches 7..11: no segment reached them
    assert len(twice) == 10 and len(never) == 10
    v = verify(tmp_path)
    assert v.seen_twice["count"] == len(twice) and v.seen_twice["rows"] == twice
    assert v.never_seen["count"] == len(never) and v.never_seen["rows"] == never
    assert v.first_divergent_step == done
    assert v.divergence["order"] == "restart_of_epoch"
    assert v.segments[1]["order"] == "restart_of_epoch"
    assert sorted(f.check for f in v.findings) == ["order.divergent_step", "order.never_seen", "order.seen_twice"]
    r = run_cli("order", "verify", str(tmp_path), "--rows", str(N), "--format", "json")
    assert r.returncode == 1
    res = json.loads(r.stdout)["result"]
    assert (res["seen_twice"]["count"], res["never_seen"]["count"], res["first_divergent_step"]) == (10, 10, done)
    assert res["seen_twice"]["rows"] == twice and res["never_seen"]["rows"] == never


def test_a_resume_in_epoch_1_replaying_epoch_0_s_permutation(tmp_path):
    """accelerate #2016's shape: the resumed sampler's epoch is 0 again (set_epoch lost)."""
    spe = N // BS
    segment(tmp_path, world=1, rank=0, steps=spe)                                  # epoch 0
    segment(tmp_path, world=1, rank=0, epoch=1, steps=4)                           # steps 12-15
    segment(tmp_path, world=1, rank=0, epoch=0, skip=4, steps=spe - 4, start_step=spe + 4)  # wrong epoch
    v = verify(tmp_path)
    assert v.first_divergent_step == spe + 4
    assert v.divergence["order"] == "another_epoch" and v.divergence["located"]["epoch"] == 0
    p0, p1 = perm(0), perm(1)
    got = [p0[i] for i in range(4 * BS, N)]  # what epoch 1 trained after the resume: epoch 0's batches 4..11
    seen1 = p1[: 4 * BS] + got
    twice = sorted(x for x in set(seen1) if seen1.count(x) > 1)
    never = sorted(set(range(N)) - set(seen1))
    assert v.seen_twice["by_epoch"].get("1", 0) == len(twice)
    assert v.never_seen["by_epoch"].get("1", 0) == len(never)


def test_a_resume_at_another_world_size(tmp_path):
    """Two ranks train 3 steps (12 rows); the run resumes on one rank and skips 3 batches of its new loader
    (6 rows), where the 12 rows trained are its first 6 batches: the launch is planned with its own world
    size from micro-batch 6, and step 3 trained its batch 3 (a rewind; before, every step of a resume at
    another world size was called world_size_changed, right or wrong)."""
    world, done = 2, 3
    spe = N // world // BS  # 6 steps per epoch under the plan (two ranks)
    for r in range(world):
        segment(tmp_path, world=world, rank=r, steps=done)
    segment(tmp_path, world=1, rank=0, skip=done, steps=spe - done, start_step=done)
    p = perm()
    first = [x for r in range(world) for x in p[r::world][: done * BS]]    # both ranks' first 3 batches
    resumed = p[done * BS: spe * BS]                                        # one rank: batches 3..5 of perm
    seen = first + resumed
    twice = sorted(x for x in set(seen) if seen.count(x) > 1)
    never = sorted(set(range(N)) - set(seen))
    v = verify(tmp_path)
    assert v.plan["world_size"] == world and v.plan["source"] == "ledger"
    assert v.first_divergent_step == done
    assert v.divergence["order"] == "rewind" and v.divergence["epoch_step"] == done * world
    assert v.divergence["located"] == {"epoch": 0, "step": done, "rank": 0}
    resumed_seg = next(s for s in v.segments if s["kind"] == "resume")
    assert resumed_seg["changed"] == {"num_replicas": [2, 1]} and resumed_seg["order"] == "rewind"
    assert [(x["rank"], x["start_step"], x["world_size"], x["micro_batch"], x["rows_before"])
            for x in v.plan["launches"]] == [(0, 0, 2, 0, 0), (0, done, 1, done * world, done * world * BS),
                                             (1, 0, 2, 0, 0)]
    assert v.seen_twice["rows"] == twice and v.seen_twice["count"] == len(twice) == 6
    assert v.never_seen["rows"] == never and v.never_seen["count"] == len(never) == 12
    assert "order.rank_skew" not in {f.check for f in v.findings}  # rank 1 left the world: not a skew


#: a run resumed with other settings: (world, batch, grad_accum) before and after, micro-batches each rank
#: trained before the resume
RELAUNCHES = {"batch size 2 -> 4": ((1, 2, 1), (1, 4, 1), 4), "world 2 -> 1": ((2, 2, 1), (1, 2, 1), 3),
              "world 1 -> 2": ((1, 2, 1), (2, 2, 1), 4), "grad_accum 1 -> 2": ((1, 2, 1), (1, 2, 2), 4)}


def _relaunched(folder, first, second, done, off=0):
    """The first launch trains ``done`` micro-batches per rank of epoch 0; the second skips the micro-batches
    its own loader holds the trained rows in (``done x world x batch`` rows, its first ``that / (world' x
    batch')`` micro-batches) plus ``off``, trains the rest of epoch 0 and 3 steps of epoch 1. Returns (the
    step it resumed at, the micro-batches it skipped)."""
    (w1, b1, g1), (w2, b2, g2) = first, second
    for r in range(w1):
        segment(folder, world=w1, rank=r, steps=done, grad_accum=g1, batch=b1)
    start = done // g1
    skip = done * w1 * b1 // (w2 * b2) + off
    for r in range(w2):
        segment(folder, world=w2, rank=r, skip=skip, steps=N // w2 // b2 - skip, start_step=start, grad_accum=g2,
                batch=b2)
        segment(folder, world=w2, rank=r, epoch=1, steps=3 * g2, grad_accum=g2, batch=b2)
    return start, skip


@pytest.mark.parametrize("name", list(RELAUNCHES))
def test_a_resume_with_other_settings_continuing_the_trained_rows_is_the_plan(tmp_path, name):
    """A run resumed with another batch size, world size or grad_accum whose loader skips the micro-batches
    holding the rows the run trained (``DistributedSampler``: one permutation of the epoch's seed whatever the
    world size, rank r at positions r, r + W, ...): each launch is planned with its own settings, no finding
    (before: order.divergent_step at the resume, the steps' rows regrouped against the first launch's plan)."""
    first, second, done = RELAUNCHES[name]
    start, skip = _relaunched(tmp_path, first, second, done)
    p0 = perm(0)
    w2, b2, g2 = second
    led = read_ledger(tmp_path)
    for r in range(w2):  # the resumed step: rank r's micro-batches skip .. skip + g2 of the new loader
        assert [i for b in led.batches[r][start] for i in b.indices] == p0[r::w2][skip * b2:(skip + g2) * b2]
    v = verify(tmp_path)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.seen_twice["count"] == 0 and v.never_seen["count"] == 0 and v.never_seen["completed_epochs"] == [0]
    resumed = [(x["rank"], x["micro_batch"], x["rows_before"]) for x in v.plan["launches"]
               if x["start_step"] == start]
    assert resumed == [(r, skip, done * first[0] * first[1]) for r in range(w2)]
    assert all(s["order"] in ("start", "continuation") for s in v.segments), v.segments
    res = run_cli("order", "verify", str(tmp_path), "--rows", str(N))
    assert res.returncode == 0 and "order.divergent_step" not in res.stdout
    assert f"launch at step {start} planned with batch_size {b2} x world_size {w2} x grad_accum {g2}" in res.stdout


def test_a_resume_onto_a_world_size_that_pads_plans_the_padding_of_the_last_launch(tmp_path):
    """One rank trains 5 batches of 2 (10 rows), the run resumes on 5 ranks, each skipping 1 batch: 24 rows
    over 5 ranks pad the permutation with its first row (rank 4's last), trained before the resume too. The
    padding is the resumed launch's, so that row's second visit is planned: no finding (counted with the
    first launch's plan, it would be seen twice)."""
    segment(tmp_path, world=1, rank=0, steps=5)
    for r in range(5):
        segment(tmp_path, world=5, rank=r, skip=1, steps=2, start_step=5)
    p = perm()
    padded = p + p[:1]
    led = read_ledger(tmp_path)
    for r in range(5):
        assert [i for s in (5, 6) for b in led.batches[r][s] for i in b.indices] == padded[r::5][2:]
    assert sum(i == p[0] for per in led.batches.values() for bs in per.values() for b in bs for i in b.indices) == 2
    v = verify(tmp_path)
    assert v.findings == [] and v.seen_twice["count"] == 0 and v.never_seen["completed_epochs"] == [0]


@pytest.mark.parametrize("off, kind", [(1, "skip_ahead"), (-1, "rewind")], ids=["a batch skipped", "a batch again"])
@pytest.mark.parametrize("name", ["batch size 2 -> 4", "world 2 -> 1", "world 1 -> 2"])
def test_a_resume_with_other_settings_off_by_a_batch_is_flagged(tmp_path, name, off, kind):
    """The same resumes skipping one micro-batch more (its rows never trained) or one fewer (trained again)."""
    first, second, done = RELAUNCHES[name]
    start, skip = _relaunched(tmp_path, first, second, done, off)
    w2, b2, _g2 = second
    p0 = perm(0)
    lost = sorted(x for r in range(w2) for x in p0[r::w2][(skip - off) * b2:skip * b2]) if off > 0 else []
    again = sorted(x for r in range(w2) for x in p0[r::w2][skip * b2:(skip - off) * b2]) if off < 0 else []
    v = verify(tmp_path)
    assert v.first_divergent_step == start and v.divergence["order"] == kind
    assert v.divergence["located"]["step"] == skip and v.divergence["epoch_step"] == skip - off
    assert v.never_seen["rows"] == lost and v.seen_twice["rows"] == again


def test_a_wrong_row_in_a_step_after_a_resume_with_other_settings_is_divergent(tmp_path):
    """The batch size 2 -> 4 resume done right, but its second step holds one row of its third step and the
    third one of the second's (two rows swapped in the ledger: every row still seen once): the second step is
    the first divergent one."""
    start, _skip = _relaunched(tmp_path, (1, 2, 1), (1, 4, 1), 4)
    path = tmp_path / "data-indices" / "rank0.tsv.gz"
    lines = gzip.decompress(path.read_bytes()).decode().splitlines(keepends=True)
    at = {int(ln.split("\t")[0]): k for k, ln in enumerate(lines) if not ln.startswith("#")}
    a, b = lines[at[start + 1]].rstrip("\n").split("\t"), lines[at[start + 2]].rstrip("\n").split("\t")
    a[4], b[4] = b[4], a[4]
    lines[at[start + 1]], lines[at[start + 2]] = "\t".join(a) + "\n", "\t".join(b) + "\n"
    path.write_bytes(gzip.compress("".join(lines).encode()))
    v = verify(tmp_path)
    assert v.first_divergent_step == start + 1 and v.divergence["order"] == "unknown"
    assert v.seen_twice["count"] == 0 and v.never_seen["count"] == 0
    assert [f.check for f in v.findings] == ["order.divergent_step"]


def test_two_ranks_resume_at_different_positions(tmp_path):
    """prime-rl #1035's shape: after the resume rank 0 skips the 2 trained batches, rank 1 does not."""
    world, done = 2, 2
    spe = N // world // BS
    for r in range(world):
        segment(tmp_path, world=world, rank=r, steps=done)
    segment(tmp_path, world=world, rank=0, skip=done, steps=spe - done, start_step=done)
    segment(tmp_path, world=world, rank=1, skip=0, steps=spe - done, start_step=done)
    mine = perm()[1::world]  # rank 1's rows in order
    twice = sorted(mine[: done * BS])
    never = sorted(mine[(spe - done) * BS:])
    v = verify(tmp_path)
    assert v.seen_twice["rows"] == twice and v.never_seen["rows"] == never
    assert v.first_divergent_step == done and v.divergence["ranks"] == [1]
    skew = next(f for f in v.findings if f.check == "order.rank_skew")
    assert skew.details["skew"][0]["positions"] == {"0": {"epoch": 0, "step": done, "rank": 0},
                                                    "1": {"epoch": 0, "step": 0, "rank": 1}}
    r = run_cli("order", "verify", str(tmp_path), "--rows", str(N))
    assert r.returncode == 1 and "order.rank_skew" in r.stdout


def test_a_config_plan_and_usage_errors(tmp_path):
    segment(tmp_path, world=1, rank=0, steps=3)
    (tmp_path / "batch.toml").write_text(f"[batch]\nbatch_size = {BS}\nseed = {SEED + 1}\n")
    r = run_cli("order", "verify", str(tmp_path), "--rows", str(N), "--config", str(tmp_path / "batch.toml"),
                "--format", "json")
    res = json.loads(r.stdout)["result"]
    assert res["plan"]["seed"] == SEED + 1 and res["first_divergent_step"] == 0  # another seed: not the plan
    assert r.returncode == 0  # a divergence alone warns; no completed epoch, no row seen twice
    r = run_cli("order", "verify", str(tmp_path), "--rows", "5")
    assert r.returncode == 2 and "dataset has 5 rows" in r.stderr
    r = run_cli("order", "verify", str(tmp_path / "nothing"))
    assert r.returncode == 2
    assert f"RUN {tmp_path / 'nothing'}: not a folder" in r.stderr and "--ledger" not in r.stderr


def test_an_olmo_ledger_restarting_its_data_position(tmp_path):
    """OLMo's data-indices/rank<r>.tsv.gz (``<global_step>\\t<index>...``, 1-based steps, OLMo's own global
    permutation sliced ``perm[r::world]`` per rank): the run resumes from step 3 but its loader starts
    at instance 0 again (the saved position lost), so steps 4-5 repeat steps 1-2's rows."""
    rows, world, dev = 22, 2, 2
    glob = world * dev
    spe = rows // glob  # 5 steps; OLMo drops the last 22 % 4 = 2 rows of the permutation
    p = np.random.default_rng(0).permutation(rows).tolist()
    per_rank = [p[: spe * glob][r::world] for r in range(world)]

    def batch(r, k):
        return per_rank[r][k * dev:(k + 1) * dev]

    folder = tmp_path / "data-indices"
    folder.mkdir()
    for r in range(world):
        lines = [f"{s}\t" + "\t".join(map(str, batch(r, s - 1))) for s in (1, 2, 3)]
        lines += [f"{s}\t" + "\t".join(map(str, batch(r, s - 4))) for s in (4, 5)]  # instances from 0 again
        (folder / f"rank{r}.tsv.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    twice = sorted(x for r in range(world) for k in (0, 1) for x in batch(r, k))
    never = sorted(set(range(rows)) - {x for r in range(world) for k in (0, 1, 2) for x in batch(r, k)})
    assert len(twice) == 8 and len(never) == 2 * glob + rows % glob
    v = verify(tmp_path, rows=rows)
    assert v.plan["source"] == "counts" and v.plan["steps_per_epoch"] == spe
    assert v.seen_twice["rows"] == twice and v.never_seen["count"] == len(never) and v.never_seen["rows"] == never
    r = run_cli("order", "verify", str(tmp_path), "--rows", str(rows))
    assert r.returncode == 1 and "no plan (visit counts only)" in r.stdout


def test_grad_accumulation_steps_group_micro_batches(tmp_path):
    """grad_accum 2: a step is two micro-batches; a resume at step 3 that skips its 6 micro-batches
    continues the plan, one that skips 4 re-trains step 2's rows."""
    ga = 2
    segment(tmp_path / "ok", world=1, rank=0, steps=3 * ga, grad_accum=ga)
    segment(tmp_path / "ok", world=1, rank=0, skip=3 * ga, steps=3 * ga, start_step=3, grad_accum=ga)
    v = verify(tmp_path / "ok")
    assert v.plan["grad_accum"] == ga and v.plan["steps_per_epoch"] == N // BS // ga
    assert v.findings == [] and v.first_divergent_step is None
    segment(tmp_path / "bad", world=1, rank=0, steps=3 * ga, grad_accum=ga)
    segment(tmp_path / "bad", world=1, rank=0, skip=2 * ga, steps=3 * ga, start_step=3, grad_accum=ga)
    v = verify(tmp_path / "bad")
    assert v.first_divergent_step == 3 and v.divergence["order"] == "rewind"
    assert v.divergence["located"]["step"] == 2
    assert v.seen_twice["rows"] == sorted(perm()[2 * ga * BS: 3 * ga * BS])


def test_a_restart_from_scratch_that_trains_the_whole_epoch_sees_every_row(tmp_path):
    """Micro-batches 0-7 (steps 0-3) trained, then the run restarts the epoch from its start (the recorder
    numbers it from step 4 on) and trains all of it: every row is seen, the first 8 micro-batches' rows
    twice; the visits of one epoch are those of both segments, whatever step numbers they carry."""
    ga, done = 2, 8
    mbs = N // BS  # 12 micro-batches per epoch on one rank
    segment(tmp_path, world=1, rank=0, steps=done, grad_accum=ga)        # steps 0-3
    segment(tmp_path, world=1, rank=0, steps=mbs, grad_accum=ga)         # the whole epoch again, steps 4-9
    twice = sorted(perm()[: done * BS])
    v = verify(tmp_path)
    assert v.segments[1]["start_step"] == done // ga and v.segments[1]["order"] == "restart_of_epoch"
    assert v.seen_twice["count"] == len(twice) == 16 and v.seen_twice["rows"] == twice
    assert v.never_seen["count"] == 0 and v.never_seen["completed_epochs"] == [0]
    assert sorted(f.check for f in v.findings) == ["order.divergent_step", "order.seen_twice"]


def test_an_unfinished_resumed_epoch_judges_no_row_never_seen(tmp_path):
    """A crash after 3 batches, a resume that skips them and stops after 4 more (7 of 12): the epoch is
    not completed, so no row is 'never seen'; a loop over a second epoch without set_epoch is a new pass."""
    segment(tmp_path, world=1, rank=0, steps=3)
    segment(tmp_path, world=1, rank=0, skip=3, steps=4, start_step=3)
    v = verify(tmp_path)
    assert v.findings == [] and v.never_seen["completed_epochs"] == []
    segment(tmp_path / "again", world=1, rank=0, steps=N // BS)   # epoch 0 whole
    segment(tmp_path / "again", world=1, rank=0, steps=N // BS)   # a second pass, sampler epoch still 0
    v = verify(tmp_path / "again")
    assert v.seen_twice["count"] == 0 and v.never_seen["completed_epochs"] == [0, 1]
    assert v.divergence["order"] == "another_epoch" and v.first_divergent_step == N // BS


def test_a_rank_that_recorded_nothing_is_named_beside_the_rows_it_leaves_unseen(tmp_path):
    """World size 2, rank 1's ledger file absent: its planned rows are never seen, and a note names
    the rank that recorded no batch (the cause), not only the rows."""
    spe = N // (2 * BS)
    segment(tmp_path, world=2, rank=0, steps=spe)
    segment(tmp_path, world=2, rank=0, epoch=1, steps=1)
    v = verify(tmp_path)
    rank1_rows = perm(0)[1::2]  # DistributedSampler: rank r takes positions r, r + world, ...
    assert v.never_seen["count"] == len(rank1_rows) and v.never_seen["by_epoch"] == {"0": len(rank1_rows)}
    assert any(n.startswith("rank(s) [1] of world size 2 recorded no batch") for n in v.notes), v.notes
    (tmp_path / "data-indices" / "rank1.tsv.gz").write_bytes(b"")  # present but empty: the same answer
    v2 = verify(tmp_path)
    assert v2.never_seen["count"] == len(rank1_rows)
    assert any(n.startswith("rank(s) [1] of world size 2 recorded no batch") for n in v2.notes), v2.notes


def test_settings_a_resumed_loader_does_not_show_are_not_changes(tmp_path):
    spe = N // BS
    segment(tmp_path, world=1, rank=0, steps=5)
    s = torch.utils.data.DistributedSampler(_Rows(), num_replicas=1, rank=0, shuffle=True, seed=SEED)
    bs = torch.utils.data.BatchSampler(s, BS, drop_last=False)
    rec = RecordingBatchSampler(SkipFirst(bs, 5, show=False), tmp_path, rank=0, start_step=5)
    it = iter(rec)
    for _ in range(spe - 5):
        next(it)
    it.close()
    led = read_ledger(tmp_path)
    assert [st.get("seed") for st in led.states[0]] == [SEED, None]  # the resume's line records no seed
    v = verify(tmp_path)
    assert v.findings == [] and [(s["kind"], s["order"], s["changed"]) for s in v.segments] == [
        ("start", "start", {}), ("resume", "continuation", {})]


def _shuffled_run(folder, restart: bool = False, n: int = 50, bs: int = 4) -> list[list[list[int]]]:
    """A single-process loop over ``DataLoader(range(n), bs, shuffle=True)`` without a generator (torch's
    RandomSampler draws each epoch's seed from the global torch RNG, which no ledger records), recorded
    with ``record_batches``, two epochs. ``restart``: it trains 3 batches, dies, and the resumed run trains
    epoch 0 again from its first batch at step 1 (the skip lost)."""
    from torch.utils.data import DataLoader

    from datacheck.torch import flush_ledgers, record_batches
    torch.manual_seed(7)
    dl = DataLoader(list(range(n)), batch_size=bs, shuffle=True)
    if restart:
        it = iter(record_batches(dl, folder))
        first = [next(it).tolist() for _ in range(3)]
        del it
        flush_ledgers()
        loader = record_batches(DataLoader(list(range(n)), batch_size=bs, shuffle=True), folder, start_step=3)
        seen = [first + [b.tolist() for b in loader]]
    else:
        loader = record_batches(dl, folder)
        seen = [[b.tolist() for b in loader] for _ in range(2)]
    flush_ledgers()
    return seen


def _drop_recorded_draws(folder) -> None:
    """Rewrite the ledger as a datacheck before ``sampler_seed`` / ``sampler_generator_state`` wrote it."""
    path = folder / "data-indices" / "rank0.tsv.gz"
    out = []
    for line in gzip.decompress(path.read_bytes()).decode().splitlines():
        if line.startswith("#state\t"):
            st = json.loads(line.split("\t", 1)[1])
            st.pop("sampler_seed", None)
            st.pop("sampler_generator_state", None)
            line = "#state\t" + json.dumps(st, sort_keys=True)
        out.append(line + "\n")
    path.write_bytes(gzip.compress("".join(out).encode()))


def test_a_plain_shuffled_loader_is_judged_by_visit_counts_not_against_an_invented_seed(tmp_path):
    """DataLoader(shuffle=True) without a generator, its ledger (as an older datacheck wrote it: no recorded
    draw) verified with no config: the ledger records a RandomSampler and no seed, so no DistributedSampler
    order of seed 0 is planned (it called step 0 divergent on this correct run); visits are counted, a note
    says why and how to make the order checkable."""
    seen = _shuffled_run(tmp_path / "clean")
    assert all(sorted(i for b in ep for i in b) == list(range(50)) for ep in seen)  # each row once an epoch
    _drop_recorded_draws(tmp_path / "clean")
    led = read_ledger(tmp_path / "clean")
    assert led.states[0][0]["sampler"] == "RandomSampler" and led.states[0][0].get("seed") is None
    v = verify_order(led, None, 50)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.plan["simulated"] is False and v.plan["seed"] is None
    assert v.never_seen["completed_epochs"] == [0, 1] and v.seen_twice["count"] == 0
    assert any("RandomSampler" in n and "not simulated" in n and 'sampler = "random"' in n for n in v.notes)
    r = run_cli("order", "verify", str(tmp_path / "clean"), "--rows", "50")
    assert r.returncode == 0, r.stderr
    assert "first divergent step: not judged (the order is not simulated)" in r.stdout
    assert "seed unknown" in r.stdout and "seed 0" not in r.stdout


def test_a_plain_shuffled_loader_that_restarts_its_epoch_is_seen_twice_by_count(tmp_path):
    """The same loader resumed without skipping: the rows of the 3 batches trained before the crash come
    again in epoch 0 (whichever the new permutation puts where): more rows twice than any order of 50 rows in
    batches of 4 trains (none), order.seen_twice with the count taken from the batches the loop received."""
    seen = _shuffled_run(tmp_path / "restart", restart=True)
    _drop_recorded_draws(tmp_path / "restart")
    visits = np.bincount([i for b in seen[0] for i in b], minlength=50)
    v = verify_order(read_ledger(tmp_path / "restart"), None, 50)
    assert [f.check for f in v.findings] == ["order.seen_twice"], v.findings
    assert v.seen_twice["count"] == int((visits >= 2).sum()) == 12


def _unrelated_draws():
    """What a training loop draws from the global torch RNG between epochs (a model's init, dropout)."""
    torch.nn.Linear(8, 8)
    torch.nn.functional.dropout(torch.ones(16), 0.5, training=True)


def _loop(folder, *, gen, workers, record=True, epochs=2, drop_last=False, grad_accum=1):
    """A single-process loop over ``DataLoader(range(50), 4, shuffle=True)`` (with ``generator=
    torch.Generator().manual_seed(3)`` when ``gen``; ``num_workers=workers`` persistent) after
    ``torch.manual_seed(7)``, with unrelated global-RNG draws before each epoch; ``record``: through
    record_batches. Returns the batches the loop received, per epoch, and the global RNG state after each."""
    from torch.utils.data import DataLoader

    from datacheck.torch import flush_ledgers, record_batches
    torch.manual_seed(7)
    kw = {"generator": torch.Generator().manual_seed(3)} if gen else {}
    if workers:
        kw.update(num_workers=workers, persistent_workers=True)
    dl = DataLoader(list(range(50)), batch_size=4, shuffle=True, drop_last=drop_last, **kw)
    loader = record_batches(dl, folder, grad_accum=grad_accum) if record else dl
    seen, states = [], []
    for _ in range(epochs):
        _unrelated_draws()
        seen.append([b.tolist() for b in loader])
        states.append(torch.get_rng_state())
    flush_ledgers()
    return seen, states


@pytest.mark.parametrize("gen,workers", [(False, 0), (True, 0), (False, 2), (True, 2)])
def test_a_plain_shuffled_loader_records_each_epoch_s_draw_and_its_order_is_simulated(tmp_path, gen, workers):
    """DataLoader(shuffle=True) with or without a generator, in the main process or with 2 persistent workers:
    record_batches records what the RandomSampler draws each epoch's permutation from without moving the
    global RNG (the loop receives what it receives unrecorded, the RNG ends where it does), and order verify
    with no config replays it: every step is the plan's, no finding."""
    seen, states = _loop(tmp_path, gen=gen, workers=workers)
    plain, plain_states = _loop(tmp_path / "unrecorded", gen=gen, workers=workers, record=False)
    assert seen == plain and all(torch.equal(a, b) for a, b in zip(states, plain_states))
    assert all(sorted(i for b in ep for i in b) == list(range(50)) for ep in seen)
    assert seen[0] != seen[1]
    led = read_ledger(tmp_path)
    assert [sorted(k for k in st if k.startswith("sampler_")) for st in led.states[0]] == \
        [["sampler_generator_state" if gen else "sampler_seed"]] * 2
    if not gen and not workers:  # the seed torch's RandomSampler drew: after the iterator's base-seed draw
        torch.manual_seed(7)
        _unrelated_draws()
        torch.empty((), dtype=torch.int64).random_()  # _BaseDataLoaderIter.__init__'s _base_seed
        seed = int(torch.empty((), dtype=torch.int64).random_().item())
        assert led.states[0][0]["sampler_seed"] == seed
        assert [i for b in seen[0] for i in b] == torch.randperm(50, generator=torch.Generator().manual_seed(seed)).tolist()
    v = verify_order(led, None, 50)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.plan.get("simulated") is not False and v.plan["sampler"] == "random_recorded"
    assert v.never_seen["completed_epochs"] == [0, 1] and v.seen_twice["count"] == 0
    assert [(sg["kind"], sg["order"]) for sg in v.segments] == [("start", "start"), ("epoch", "continuation")]
    r = run_cli("order", "verify", str(tmp_path), "--rows", "50")
    assert r.returncode == 0, r.stderr
    assert "first divergent step: none (the recorded order is the plan's)" in r.stdout
    assert "seed as recorded each epoch (torch's RandomSampler" in r.stdout


def test_a_recorded_draw_plans_drop_last_and_grad_accum_steps(tmp_path):
    """drop_last (12 batches of 4 from 50 rows, 2 rows dropped an epoch) and grad_accum 3 (4 steps an epoch):
    each step is the plan's, the 2 rows an epoch drops are planned unseen (no finding), and a step's rows are
    its 3 micro-batches as the loop received them."""
    seen, _states = _loop(tmp_path, gen=False, workers=0, drop_last=True, grad_accum=3)
    assert [len(ep) for ep in seen] == [12, 12]
    led = read_ledger(tmp_path)
    flat = [b for ep in seen for b in ep]
    assert [[i for b in led.batches[0][s] for i in b.indices] for s in led.steps] == \
        [[i for b in flat[k:k + 3] for i in b] for k in range(0, 24, 3)]
    v = verify_order(led, None, 50)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.plan["steps_per_epoch"] == 4 and v.plan["sampler"] == "random_recorded"
    assert v.never_seen["completed_epochs"] == [0, 1] and v.never_seen["count"] == 0


def _resumed(folder, *, skip: int, trained: int = 3, reseed: bool = True):
    """A plain ``DataLoader(range(50), 4, shuffle=True)`` loop (no generator) that trains ``trained`` batches
    and dies; the resumed process (seeded as the first, so its RandomSampler draws the same permutation)
    resumes at step ``trained`` with a loader whose batch sampler skips its first ``skip`` batches (``skip =
    trained`` is right, 0 restarts the epoch, more skips batches) and trains to the epoch's end. Returns the
    batches each process received."""
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    from datacheck.torch import flush_ledgers, record_batches
    data = list(range(50))
    torch.manual_seed(7)
    it = iter(record_batches(DataLoader(data, batch_size=4, shuffle=True), folder))
    first = [next(it).tolist() for _ in range(trained)]
    del it
    flush_ledgers()
    if reseed:
        torch.manual_seed(7)
    bs = SkipFirst(BatchSampler(RandomSampler(data), 4, drop_last=False), skip)
    loader = record_batches(DataLoader(data, batch_sampler=bs), folder, start_step=trained)
    second = [b.tolist() for b in loader]
    flush_ledgers()
    return first, second


def test_a_recorded_draw_makes_a_restarted_epoch_divergent_at_its_step(tmp_path):
    """The resume trains the epoch from its first batch again (no skip): its step 3 holds the rows of step 0
    (restart_of_epoch), and the rows of the 3 batches trained before the crash are seen twice."""
    first, second = _resumed(tmp_path, skip=0)
    assert second[:3] == first  # the same permutation: the resumed process drew the same seed
    visits = np.bincount([i for b in first + second for i in b], minlength=50)
    v = verify_order(read_ledger(tmp_path), None, 50)
    assert [f.check for f in v.findings] == ["order.divergent_step", "order.seen_twice"], v.findings
    assert v.first_divergent_step == len(first) and v.divergence["order"] == "restart_of_epoch"
    assert v.divergence["located"] == {"epoch": 0, "step": 0, "rank": 0}
    assert v.seen_twice["count"] == int((visits >= 2).sum()) == 12 and v.never_seen["count"] == 0


def test_a_recorded_draw_names_the_rows_a_resume_that_skips_too_far_never_trains(tmp_path):
    """The resume skips 5 batches where 3 were trained: step 3 holds the rows of step 5 (skip_ahead), and
    the rows of batches 3 and 4 of the permutation, never trained, are never seen; a right resume (skip 3)
    is the plan."""
    from torch.utils.data import DataLoader

    first, second = _resumed(tmp_path / "far", skip=5)
    torch.manual_seed(7)
    planned = [b.tolist() for b in DataLoader(list(range(50)), batch_size=4, shuffle=True)]  # the epoch's batches
    assert first == planned[:3] and second == planned[5:]
    lost = sorted(i for b in planned[3:5] for i in b)
    v = verify_order(read_ledger(tmp_path / "far"), None, 50)
    assert [f.check for f in v.findings] == ["order.divergent_step", "order.never_seen"], v.findings
    assert v.first_divergent_step == 3 and v.divergence["order"] == "skip_ahead"
    assert v.divergence["located"] == {"epoch": 0, "step": 5, "rank": 0}
    assert v.never_seen["count"] == len(lost) == 8 and v.never_seen["rows"] == lost
    assert v.seen_twice["count"] == 0
    _resumed(tmp_path / "right", skip=3)
    v = verify_order(read_ledger(tmp_path / "right"), None, 50)
    assert v.findings == [] and v.first_divergent_step is None
    assert [(sg["kind"], sg["order"]) for sg in v.segments] == [("start", "start"), ("resume", "continuation")]


def test_a_resume_that_draws_another_permutation_is_judged_against_the_epoch_s(tmp_path):
    """The resumed process is not seeded as the first (its RandomSampler draws another seed): it skips the 3
    trained batches of ANOTHER permutation. Its step 3 is not the epoch's, a note names the two seeds, and
    the visits of epoch 0 are those the loop received."""
    first, second = _resumed(tmp_path, skip=3, reseed=False)
    visits = np.bincount([i for b in first + second for i in b], minlength=50)
    led = read_ledger(tmp_path)
    s0, s1 = (st["sampler_seed"] for st in led.states[0])
    assert s0 != s1
    v = verify_order(led, None, 50)
    assert v.first_divergent_step == 3 and v.divergence["order"] == "unknown"  # not a step of the epoch's order
    assert any(f"drew another RandomSampler permutation than the epoch's first iteration (seed {s1}, not {s0})" in n
               for n in v.notes), v.notes
    assert v.seen_twice["count"] == int((visits >= 2).sum()) and v.never_seen["count"] == int((visits == 0).sum())
    assert v.seen_twice["count"] > 0


def test_a_generator_state_this_torch_does_not_take_falls_back_to_counts_with_a_note(tmp_path):
    """A #state whose sampler_generator_state is not a state torch's CPU generator takes (cut short): the
    order is not replayed (no divergent step judged, visits by count) and a note says why."""
    _loop(tmp_path, gen=True, workers=0)
    path = tmp_path / "data-indices" / "rank0.tsv.gz"
    out = []
    for line in gzip.decompress(path.read_bytes()).decode().splitlines():
        if line.startswith("#state\t"):
            st = json.loads(line.split("\t", 1)[1])
            raw = zlib.decompress(base64.b64decode(st["sampler_generator_state"]))[:100]
            st["sampler_generator_state"] = base64.b64encode(zlib.compress(raw)).decode()
            line = "#state\t" + json.dumps(st, sort_keys=True)
        out.append(line + "\n")
    path.write_bytes(gzip.compress("".join(out).encode()))
    v = verify_order(read_ledger(tmp_path), None, 50)
    assert v.findings == [] and v.plan["simulated"] is False and v.first_divergent_step is None
    assert any("records a sampler_generator_state this torch's CPU generator does not take" in n for n in v.notes)


def test_a_recorded_draw_plans_a_random_sampler_s_own_num_samples(tmp_path):
    """RandomSampler(range(50), num_samples=70): a permutation then 20 rows of a second one an epoch, 18
    batches; the 20 rows it yields twice are planned twice (no finding), each step is the plan's."""
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    from datacheck.torch import flush_ledgers, record_batches
    data = list(range(50))
    torch.manual_seed(11)
    loader = record_batches(DataLoader(data, batch_sampler=BatchSampler(RandomSampler(data, num_samples=70), 4,
                                                                        drop_last=False)), tmp_path)
    seen = [[b.tolist() for b in loader] for _ in range(2)]
    flush_ledgers()
    visits = np.bincount([i for b in seen[0] for i in b], minlength=50)
    assert len(seen[0]) == 18 and int((visits == 2).sum()) == 20
    led = read_ledger(tmp_path)
    assert led.states[0][0]["num_samples"] == 70 and led.states[0][0]["dataset_rows"] == 50
    v = verify_order(led, None, 50)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.plan["steps_per_epoch"] == 18 and v.seen_twice["count"] == 0
