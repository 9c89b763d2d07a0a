"""Real tiny runs (``tests/helpers/resumeledger.py``: plain torch, ``DistributedSampler``, each run in fresh
processes, two gloo ranks where the world grows) whose ledger must be the order the loops trained:

- a resume that changes the batch size or the world size and skips the consumed rows by ``itertools.islice``
  with ``resume_skips=True``: the skipped batches hold the rows consumed before the resume in the new
  batching (never the ledger's micro-batches), and are not recorded;
- a correct resume with another batch size or world size (1 -> 2, 2 -> 1): ``order verify`` plans each
  launch with its own settings and finds nothing, while the same resume off by one batch (skipped, or
  trained again) is flagged;
- a correct resume from one rank to two: ``order verify`` passes (rank 1, new at the resume, is at the
  position rank 0 is), and a rank that skipped otherwise is still ``order.rank_skew``;
- a new run recording into the folder of a finished one: it is recorded from step 0, superseding the
  earlier run's lines, as the warning says and ``order verify`` notes.

Every expected row comes from the sampler arithmetic: ``DistributedSampler(num_replicas=W, shuffle=True,
seed=S)`` orders epoch ``e`` as ``torch.randperm(N)`` of a generator seeded ``S + e`` (``N`` a multiple of ``W``
here: no padding), rank ``r`` takes positions ``r, r + W, ...``; and from what the loops wrote they trained."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import run_cli

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():  # pragma: no cover - a torch build without distributed
    pytest.skip("torch.distributed is not available", allow_module_level=True)
from resumeledger import spawn  # noqa: E402

from datacheck.io.ledger import read_ledger  # noqa: E402

pytestmark = pytest.mark.slow  # each run spawns fresh interpreters that import torch

N, B, SEED, EPOCHS = 50, 4, 0, 2
SPE = math.ceil(N / B)  # 13 steps in epoch 0 (batch size 4, one rank)


def _order(epoch: int, seed: int = SEED) -> list[int]:
    return torch.randperm(N, generator=torch.Generator().manual_seed(seed + epoch)).tolist()


def _batches(rows: list[int], bs: int) -> list[list[int]]:
    return [rows[i:i + bs] for i in range(0, len(rows), bs)]


def _first_run(root: Path, stop_at: int, name: str = "first", **kw) -> None:
    spawn(root, 1, name=name, n=N, bs=B, epochs=EPOCHS, stop_at=stop_at, skip="none", **kw)


def _truth(root: Path, name: str, rank: int) -> dict[int, list[int]]:
    """step -> the rows the loop of run ``name`` trained on rank ``rank``."""
    lines = (root / f"truth-{name}-rank{rank}.jsonl").read_text().splitlines()
    return {r["step"]: r["rows"] for r in map(json.loads, lines)}


def _ledger(root: Path, rank: int) -> dict[int, list[int]]:
    led = read_ledger(root)
    return {s: [i for b in bs for i in b.indices] for s, bs in led.batches[rank].items()}


def _warnings(root: Path, name: str, rank: int = 0) -> list[str]:
    return json.loads((root / f"warnings-{name}-rank{rank}.json").read_text())


def _verify(root: Path) -> tuple[int, dict]:
    res = run_cli("order", "verify", str(root), "--rows", str(N), "--format", "json")
    return res.returncode, json.loads(res.stdout)["result"]


def _checks(v: dict) -> set[str]:
    return {f["check"] for f in v["findings"]}


@pytest.mark.parametrize("bs2, world2", [(8, 1), (4, 2)], ids=["batch size 4 -> 8", "world 1 -> 2"])
def test_an_islice_resume_with_another_batching_skips_the_consumed_rows(tmp_path, bs2, world2):
    """Stopped at step 15 (epoch 1's first 8 rows trained in 2 batches of 4), resumed in another batching with
    islice over the k = 8 // (bs x world) = 1 batch(es) holding those rows on each rank: the ledger is every
    step once with the rows the loops trained, step 15 the epoch's rows after the consumed 8, and order verify
    finds no row twice or never (before the fix: the skipped batch was recorded as step 15, every later step
    shifted by one, 8 rows seen twice, exit 1)."""
    _first_run(tmp_path, 15)
    spawn(tmp_path, world2, name="resumed", n=N, bs=bs2, epochs=EPOCHS, resume=True, skip="islice")
    o0, o1 = _order(0), _order(1)
    want = {r: {} for r in range(world2)}
    want[0] = {s: b for s, b in enumerate(_batches(o0, B))} | {SPE: o1[0:4], SPE + 1: o1[4:8]}
    for r in range(world2):  # rank r's share of epoch 1 less its first batch (the consumed 8 rows' part)
        want[r].update({15 + k: b for k, b in enumerate(_batches(o1[r::world2][bs2:], bs2))})
    trained = {r: _truth(tmp_path, "resumed", r) for r in range(world2)}
    trained[0] = _truth(tmp_path, "first", 0) | trained[0]
    for r in range(world2):
        assert trained[r] == want[r]  # the loops trained the sampler's rows: a correct run
        assert _ledger(tmp_path, r) == want[r]
    assert _ledger(tmp_path, 0)[15] == (o1[8:16] if world2 == 1 else o1[8:16:2])
    assert not [w for r in range(world2) for w in _warnings(tmp_path, "resumed", r)]
    rc, v = _verify(tmp_path)
    assert v["seen_twice"]["count"] == 0 and v["never_seen"]["count"] == 0
    assert v["never_seen"]["completed_epochs"] == [0, 1]
    assert rc == 0 and v["findings"] == [] and v["first_divergent_step"] is None, v["findings"]


#: (world, batch size) of the first launch, its stop step, (world, batch size) of the resumed one: the rows
#: trained of epoch 1 at the stop (8, or 16 with two ranks) fill whole batches of the resumed loader
LAUNCHES = {"batch size 4 -> 8": ((1, 4), 15, (1, 8)), "world 1 -> 2": ((1, 4), 15, (2, 4)),
            "world 2 -> 1": ((2, 4), 9, (1, 4)), "world 2 -> 1, batch size 4 -> 8": ((2, 4), 9, (1, 8))}


def _launches(root: Path, name: str, skip: str = "islice", off: int = 0) -> tuple[int, int, dict[int, dict]]:
    """The first launch of ``LAUNCHES[name]`` to its stop (3 epochs), the resumed one skipping the ``k`` batches
    per rank holding the rows trained of epoch 1 (``k + off`` with ``skip="sampler"``) and training to the end
    of epoch 2. Returns (stop step, k, rank -> step -> the rows a correct run trains, from the sampler
    arithmetic: epoch e is randperm(N) seeded SEED + e, rank r of W takes positions r, r + W, ...)."""
    (w1, b1), stop, (w2, b2) = LAUNCHES[name]
    spawn(root, w1, name="first", n=N, bs=b1, epochs=3, stop_at=stop, skip="none")
    spe1 = math.ceil(N / w1 / b1)
    consumed = (stop - spe1) * b1 * w1  # rows of epoch 1 trained before the stop, over every rank
    k = consumed // (b2 * w2)
    assert k * b2 * w2 == consumed
    kw = {"skip_batches": {str(r): k + off for r in range(w2)}} if skip == "sampler" else {}
    spawn(root, w2, name="resumed", n=N, bs=b2, epochs=3, resume=True, skip=skip, **kw)
    want: dict[int, dict] = {r: {} for r in range(max(w1, w2))}
    o0, o1, o2 = _order(0), _order(1), _order(2)
    for r in range(w1):
        want[r] = dict(enumerate(_batches(o0[r::w1], b1))) | {spe1 + j: b for j, b in
                                                               enumerate(_batches(o1[r::w1], b1)[:stop - spe1])}
    for r in range(w2):
        rest = _batches(o1[r::w2][k * b2:], b2)
        want[r].update({stop + j: b for j, b in enumerate(rest)})
        want[r].update({stop + len(rest) + j: b for j, b in enumerate(_batches(o2[r::w2], b2))})
    return stop, k, want


@pytest.mark.parametrize("name", list(LAUNCHES))
def test_a_resume_with_another_batch_size_or_world_size_is_planned_per_launch(tmp_path, name):
    """A real plain-torch run (DistributedSampler, gloo with two ranks) stopped in epoch 1 and resumed with
    another batch size and/or world size, skipping (itertools.islice, resume_skips) the batches of its new
    loader that hold the rows trained of epoch 1 (the same permutation, whatever the world size): the loops
    trained the sampler's rows, the ledger records them, and order verify plans each launch with its own
    settings: no finding at all (before: order.divergent_step at the resume step, the steps' rows regrouped
    against a single-launch plan of the first launch's settings)."""
    stop, k, want = _launches(tmp_path, name)
    (w1, _b1), _stop, (w2, b2) = LAUNCHES[name]
    for r in range(max(w1, w2)):
        trained = (_truth(tmp_path, "first", r) if r < w1 else {}) | (_truth(tmp_path, "resumed", r) if r < w2 else {})
        assert trained == want[r]  # the loops trained the sampler's rows: a correct run
        assert _ledger(tmp_path, r) == want[r]
    rc, v = _verify(tmp_path)
    assert rc == 0 and v["findings"] == [] and v["first_divergent_step"] is None, v["findings"]
    assert v["never_seen"]["completed_epochs"] == [0, 1, 2]
    assert [(x["rank"], x["epoch"], x["world_size"], x["batch_size"], x["micro_batch"])
            for x in v["plan"]["launches"] if x["start_step"] == stop] == [(r, 1, w2, b2, k) for r in range(w2)]


@pytest.mark.parametrize("off", [1, -1], ids=["a batch skipped", "a batch trained again"])
@pytest.mark.parametrize("name", ["batch size 4 -> 8", "world 1 -> 2", "world 2 -> 1"])
def test_a_resume_with_other_settings_off_by_a_batch_is_still_flagged(tmp_path, name, off):
    """The same resumes whose samplers skip one batch more (its rows never trained) or one fewer (its rows
    trained twice): the resume step is the first divergent one (skip_ahead; rewind, or restart_of_epoch when
    it skipped none), and the rows are flagged
    never seen or seen twice; exit 1."""
    stop, k, _want = _launches(tmp_path, name, skip="sampler", off=off)
    _first, _stop, (w2, b2) = LAUNCHES[name]
    o1 = _order(1)
    for r in range(w2):  # what the resumed loops trained at the resume step
        assert _truth(tmp_path, "resumed", r)[stop] == o1[r::w2][(k + off) * b2:(k + off + 1) * b2]
    rows = sorted(x for r in range(w2) for x in o1[r::w2][min(k, k + off) * b2:max(k, k + off) * b2])
    rc, v = _verify(tmp_path)
    assert rc == 1 and v["first_divergent_step"] == stop
    assert v["divergence"]["order"] == ("skip_ahead" if off > 0 else "rewind" if k + off else "restart_of_epoch")
    if off > 0:
        assert v["never_seen"]["rows"] == rows and v["seen_twice"]["count"] == 0
    else:
        assert v["seen_twice"]["rows"] == rows and v["never_seen"]["count"] == 0


def test_a_skip_that_cuts_a_new_batch_is_recorded_as_trained_and_warned(tmp_path):
    """Stopped at step 16 (epoch 1's first 12 rows), resumed at batch size 8: islice skips 12 // 8 = 1 batch,
    and batch 1 holds 4 consumed rows and 4 new ones. It is trained (the loop's k), so it is recorded as
    trained, its 4 consumed rows seen twice (as the loop truly trained them), and a warning says the batch
    straddles the consumed rows."""
    _first_run(tmp_path, 16)
    spawn(tmp_path, 1, name="resumed", n=N, bs=8, epochs=EPOCHS, resume=True, skip="islice")
    o1 = _order(1)
    assert _truth(tmp_path, "resumed", 0)[16] == o1[8:16]
    assert _ledger(tmp_path, 0)[16] == o1[8:16]
    said = _warnings(tmp_path, "resumed")
    assert len(said) == 1 and "batch 1 of epoch 1 holds 4 row(s) the ledger records as trained before step 16" \
        in said[0], said
    rc, v = _verify(tmp_path)
    assert rc == 1 and v["seen_twice"]["count"] == 4 and v["seen_twice"]["rows"] == sorted(o1[8:12])


@pytest.mark.parametrize("skip_batches, skew", [(None, False), ({"0": 1, "1": 2}, True)],
                         ids=["both ranks skip the consumed rows", "rank 1 skips a batch more"])
def test_a_resume_from_one_rank_to_two_is_judged_by_the_ranks_positions(tmp_path, skip_batches, skew):
    """Stopped at step 15 on one rank, resumed on two whose samplers skip their share of the consumed 8 rows
    (one batch of 4 each): rank 1, which did not exist before the resume, is at the plan position rank 0 is
    (epoch 1 step 1 of a two-rank plan): no order.rank_skew, exit 0 (before the fix: 'rank(s) [1] recorded no
    resume', exit 1). A rank 1 that skips two batches is at another position: order.rank_skew."""
    _first_run(tmp_path, 15)
    spawn(tmp_path, 2, name="resumed", n=N, bs=B, epochs=EPOCHS, resume=True, skip="sampler",
          **({"skip_batches": skip_batches} if skip_batches else {}))
    o1 = _order(1)
    for r in range(2):
        k = (skip_batches or {}).get(str(r), 1)
        assert _truth(tmp_path, "resumed", r)[15] == o1[r::2][k * B:(k + 1) * B]
        assert _ledger(tmp_path, r)[15] == o1[r::2][k * B:(k + 1) * B]
    rc, v = _verify(tmp_path)
    assert ("order.rank_skew" in _checks(v)) is skew, v["findings"]
    if not skew:
        assert rc == 0 and v["seen_twice"]["count"] == 0 and v["never_seen"]["count"] == 0, v["findings"]
        assert [(s["rank"], s["located"]) for s in v["segments"] if s["start_step"] == 15] == [
            (0, {"epoch": 1, "step": 1, "rank": 0, "world_size": 2}),
            (1, {"epoch": 1, "step": 1, "rank": 1, "world_size": 2})]


@pytest.mark.parametrize("seed2", [SEED, SEED + 1], ids=["same seed", "another seed"])
def test_a_new_run_over_a_finished_runs_ledger_is_recorded_from_step_0(tmp_path, seed2):
    """A finished one-epoch run, then a new run (fresh process, step 0, no start_step) into the same folder:
    the new run's steps are its own (step 0 is its first batch, not the old run's), the warning says the
    earlier run's lines are superseded, and order verify judges the new run (no row seen twice, exit 0) and
    notes the restart (before the fix: the new run was numbered from step 13 and plan --ledger --step 0 gave
    the old run's rows, while the warning promised rows flagged as seen twice that order verify did not flag)."""
    spawn(tmp_path, 1, name="old", n=N, bs=B, epochs=1, skip="none")
    spawn(tmp_path, 1, name="new", n=N, bs=B, epochs=1, skip="none", seed=seed2)
    want = dict(enumerate(_batches(_order(0, seed2), B)))
    assert _truth(tmp_path, "new", 0) == want
    assert _ledger(tmp_path, 0) == want
    said = _warnings(tmp_path, "new")
    assert len(said) == 1 and "a new run" in said[0] and "recorded from step 0" in said[0] \
        and "supersede the earlier run's" in said[0], said
    res = run_cli("plan", "--ledger", str(tmp_path), "--step", "0")
    assert [int(x.split("global ")[1].split(":")[0]) for x in res.stdout.splitlines() if " global " in x] == want[0]
    rc, v = _verify(tmp_path)
    assert rc == 0 and v["seen_twice"]["count"] == 0 and v["first_divergent_step"] is None, v["findings"]
    assert any("the run started over at step 0" in n and "13 step(s) recorded before it" in n for n in v["notes"])


def test_a_new_process_resumed_at_an_epochs_end_continues_the_ledger(tmp_path):
    """Not a new run: a run stopped at the end of epoch 0 (step 13) and resumed in a new process at epoch 1
    without start_step continues the ledger at step 13 (epoch 1's order), no warning."""
    _first_run(tmp_path, SPE)
    spawn(tmp_path, 1, name="resumed", n=N, bs=B, epochs=EPOCHS, resume=True, skip="none")
    want = dict(enumerate(_batches(_order(0), B))) | {SPE + k: b for k, b in enumerate(_batches(_order(1), B))}
    assert _truth(tmp_path, "first", 0) | _truth(tmp_path, "resumed", 0) == want
    assert _ledger(tmp_path, 0) == want
    assert _warnings(tmp_path, "resumed") == []
    rc, v = _verify(tmp_path)
    assert rc == 0 and v["first_divergent_step"] is None and not v["notes"], v
