"""``order verify`` on ledgers of accelerate-prepared loaders: every process of a run built in this process
with ``prepare_data_loader`` (what ``accelerator.prepare`` calls; tests/helpers/acceleratehelp.py) and
recorded with ``record_batches(prepared, folder)``. The ledger's ``#state`` says the loader is accelerate's,
so the plan is accelerate's dealing of whole batches (never DistributedSampler dealing rows). Every
expected step, process, row and count comes from accelerate's own ``BatchSamplerShard`` over the epoch's
permutation (``reference_shards``), never from datacheck.

50 rows in batches of 4 over 2 processes: 13 batches, the 13th short; ``even_batches`` fills it up and adds
a 14th made of the epoch's first rows, so each process trains 7 micro-batches (4 optimizer steps with
``grad_accum`` 2, the last of one micro-batch) and some rows twice per epoch, as planned."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
from acceleratehelp import prepared, record_run, reference_shards, step_rows  # noqa: E402

from datacheck.io.ledger import read_ledger, step_indices  # noqa: E402
from datacheck.model.config import BatchSection  # noqa: E402
from datacheck.resume.order import verify_order  # noqa: E402
from datacheck.torch import flush_ledgers, record_batches  # noqa: E402

N, P, BS, SEED, GA = 50, 2, 4, 3, 2
SPE = -(-len(reference_shards(N, P, BS, SEED, 0)[0]) // GA)  # optimizer steps per epoch: ceil(7 / 2) = 4


@pytest.fixture(autouse=True)
def accelerate_state():
    state = pytest.importorskip("accelerate.state")
    yield
    state.PartialState._reset_state()


def _recorded_steps(folder) -> dict[int, dict[int, list[int]]]:
    return step_indices(read_ledger(folder))


def _want_steps(epochs: int, **kw) -> dict[int, dict[int, list[int]]]:
    """Step -> process -> rows from accelerate's arithmetic, epoch ``e`` seeded ``SEED + e``: each process
    counts its own optimizer steps epoch after epoch, ``ceil(its micro-batches / GA)`` an epoch (with
    ``even_batches=False`` process 1 gets 6 micro-batches where process 0 gets 7: 3 steps an epoch, not 4,
    so its epoch 1 starts at its step 3; DDP pairs the k-th backward of every process)."""
    out: dict[int, dict[int, list[int]]] = {}
    base = [0] * P
    for e in range(epochs):
        ref = reference_shards(N, P, BS, SEED, e, **kw)
        for p in range(P):
            own = -(-len(ref[p]) // GA)
            for s in range(own):
                out.setdefault(base[p] + s, {})[p] = step_rows(ref, s, GA)[p]
            base[p] += own
    return out


@pytest.mark.parametrize("kw,epochs", [({}, 2), ({"drop_last": True}, 2), ({"split_batches": True}, 2),
                                       ({"even_batches": False}, 2),
                                       ({"even_batches": False, "split_batches": True}, 2)],
                         ids=["even_batches", "drop_last", "split_batches", "uneven", "uneven_split"])
def test_a_clean_run_is_the_plan(tmp_path, kw, epochs):
    seen = record_run(tmp_path, N, P, BS, SEED, ga=GA, epochs=epochs, **kw)
    for p in range(P):
        assert seen[p] == [reference_shards(N, P, BS, SEED, e, **kw)[p] for e in range(epochs)]
    assert _recorded_steps(tmp_path) == _want_steps(epochs, **kw)
    v = verify_order(read_ledger(tmp_path), None, N)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert v.plan["loader"] == "accelerate" and v.plan["world_size"] == P and v.plan["source"] == "ledger"
    assert (v.plan["even_batches"], v.plan["split_batches"]) == (kw.get("even_batches", True),
                                                                 kw.get("split_batches", False))
    assert v.never_seen["completed_epochs"] == list(range(epochs))
    if not kw.get("even_batches", True):  # process 1 has a micro-batch fewer: it counts its own steps
        shares = [len(s) for s in reference_shards(N, P, BS, SEED, 0, **kw)]
        assert shares == [7, 6]
        states = read_ledger(tmp_path).states
        assert [st["start_step"] for st in states[1]] == [0, -(-6 // GA)] == [0, 3]
        assert [st["start_step"] for st in states[0]] == [0, 4]
        assert all(st.get("epoch_steps") == "own" for sts in states.values() for st in sts)
    if kw == {}:  # the padding is trained twice, as planned: no order.seen_twice
        visits = np.bincount([i for shard in seen for i in sum(shard[0], [])], minlength=N)
        assert (visits == 2).sum() == 14 * BS - N and visits.min() == 1
        assert v.plan["steps_per_epoch"] == SPE == 4


def test_the_accelerate_plan_is_taken_from_the_ledger_under_a_config_of_loader_auto(tmp_path):
    """A config's [batch] (loader auto) gets accelerate's loader and even_batches from the ledger; a config
    that says loader torch is planned as torch deals rows, and the ledger leaves that plan at step 0."""
    record_run(tmp_path, N, P, BS, SEED, ga=GA, epochs=1)
    led = read_ledger(tmp_path)
    auto = verify_order(led, BatchSection(batch_size=BS, world_size=P, grad_accum=GA, seed=SEED), N)
    assert auto.findings == [] and auto.plan["loader"] == "accelerate" and auto.plan["source"] == "config"
    assert any("accelerate-prepared loader" in n for n in auto.notes)
    torch_plan = verify_order(led, BatchSection(batch_size=BS, world_size=P, grad_accum=GA, seed=SEED,
                                                loader="torch"), N)
    assert torch_plan.plan["loader"] == "torch" and torch_plan.first_divergent_step == 0


def _crash(folder, p: int, micro_batches: int) -> None:
    """Process ``p`` trains ``micro_batches`` micro-batches of epoch 0 and dies."""
    loader = record_batches(prepared(N, P, p, BS, SEED), folder, grad_accum=GA)
    it = iter(loader)
    for _ in range(micro_batches):
        next(it)
    del it, loader
    flush_ledgers()


def test_a_resume_through_skip_first_batches_continues_the_plan(tmp_path):
    """Each process dies after 3 micro-batches (step 0 done, step 1 half done); the resumed run restores
    step 1, skips its 2 trained batches with ``skip_first_batches`` and records from step 1 on; epoch 1
    follows (``set_epoch(1)``, a recorder of its own) from step 4. Every process, step and row is
    accelerate's."""
    from accelerate.data_loader import skip_first_batches
    for p in range(P):
        _crash(tmp_path, p, 3)
    for p in range(P):
        dl = prepared(N, P, p, BS, SEED)
        resumed = record_batches(skip_first_batches(dl, 1 * GA), tmp_path, grad_accum=GA, start_step=1)
        assert [b.tolist() for b in resumed] == reference_shards(N, P, BS, SEED, 0)[p][GA:]
        dl.set_epoch(1)
        nxt = record_batches(dl, tmp_path, grad_accum=GA)  # continues after the epoch's last step, SPE - 1
        assert [b.tolist() for b in nxt] == reference_shards(N, P, BS, SEED, 1)[p]
    flush_ledgers()
    led = read_ledger(tmp_path)
    assert sorted(led.ranks) == [0, 1]  # each process under its own process_index, the resumed one too
    assert step_indices(led) == _want_steps(2)
    v = verify_order(led, None, N)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert [(s["rank"], s["kind"], s["order"]) for s in v.segments if s["kind"] != "start"] == [
        (0, "resume", "continuation"), (0, "epoch", "continuation"), (1, "resume", "continuation"),
        (1, "epoch", "continuation")]
    assert v.never_seen["completed_epochs"] == [0, 1]


def test_a_resume_that_restarts_the_epoch_is_found(tmp_path):
    """The resumed run forgets skip_first_batches: from step 1 each process trains the epoch again from its
    first batch. The first divergent step is 1 (a restart of the epoch), and the rows trained more often
    than planned are those of the batches trained again, counted from accelerate's arithmetic."""
    for p in range(P):
        _crash(tmp_path, p, 3)
    for p in range(P):
        list(record_batches(prepared(N, P, p, BS, SEED), tmp_path, grad_accum=GA, start_step=1))
    flush_ledgers()
    v = verify_order(read_ledger(tmp_path), None, N)
    assert v.first_divergent_step == 1 and v.divergence["order"] == "restart_of_epoch"
    ref = reference_shards(N, P, BS, SEED, 0)
    planned = np.bincount([i for shard in ref for mb in shard for i in mb], minlength=N)
    trained = np.bincount([i for shard in ref for mb in shard[:GA] + shard for i in mb], minlength=N)
    over = np.flatnonzero((trained > planned) & (trained >= 2))
    assert v.seen_twice["count"] == len(over) > 0 and v.seen_twice["rows"] == over[:20].tolist()


def _random_run(folder, restart: bool = False) -> list[list[list[list[int]]]]:
    """``DataLoader(rows, 4, shuffle=True)`` prepared for each process (a RandomSampler: accelerate gives it a
    generator seeded from torch's RNG, the same on every process of a real run, where accelerate synchronises
    it; here ``torch.manual_seed(11)`` before each process's prepare), two epochs. ``restart``: process ``p``
    trains 3 micro-batches, dies, and the resumed run trains epoch 0 again from its first batch at step 1."""
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader
    seen = []
    for p in range(P):
        torch.manual_seed(11)
        dl = prepare_data_loader(DataLoader(list(range(N)), batch_size=BS, shuffle=True), num_processes=P,
                                 process_index=p)
        if restart:
            it = iter(record_batches(dl, folder, grad_accum=GA))
            for _ in range(3):
                next(it)
            del it
            flush_ledgers()
            torch.manual_seed(11)  # the resumed process: a fresh prepare, the same generator seed
            dl = prepare_data_loader(DataLoader(list(range(N)), batch_size=BS, shuffle=True), num_processes=P,
                                     process_index=p)
            loader = record_batches(dl, folder, grad_accum=GA, start_step=1)
        else:
            loader = record_batches(dl, folder, grad_accum=GA)
        seen.append([[b.tolist() for b in loader] for _ in range(1 if restart else 2)])
    flush_ledgers()
    return seen


def test_an_unseeded_random_sampler_is_judged_by_visit_counts(tmp_path):
    """accelerate's RandomSampler (shuffle=True, no seedable sampler): its permutation is not simulated, so no
    divergent step is judged (a note says why) and the even_batches padding (6 rows trained twice per epoch,
    which ones the permutation decides) is no order.seen_twice; a resume that restarts the epoch trains more
    rows twice than any permutation pads: order.seen_twice, counted from the batches each process was given."""
    seen = _random_run(tmp_path / "clean")
    per_epoch = [np.bincount([i for s in seen for mb in s[e] for i in mb], minlength=N) for e in range(2)]
    padded = 14 * BS - N
    assert all((c == 2).sum() == padded and c.min() == 1 for c in per_epoch)
    v = verify_order(read_ledger(tmp_path / "clean"), None, N)
    assert v.findings == [] and v.first_divergent_step is None, v.findings
    assert any("RandomSampler" in n and "not simulated" in n for n in v.notes)
    assert v.never_seen["completed_epochs"] == [0, 1]
    seen = _random_run(tmp_path / "restart", restart=True)
    trained = np.bincount([i for s in seen for mb in s[0][:GA] + s[0] for i in mb], minlength=N)
    v = verify_order(read_ledger(tmp_path / "restart"), None, N)
    assert [f.check for f in v.findings] == ["order.seen_twice"]
    assert v.seen_twice["count"] == int((trained >= 2).sum()) - padded > 0


def test_accelerates_seedable_sampler_is_planned_from_its_data_seed(tmp_path):
    """use_seedable_sampler with data_seed 5 (accelerate's SeedableRandomSampler: randperm of a generator
    seeded data_seed + epoch, the DistributedSampler(num_replicas=1, seed=5) order): the ledger records seed 5
    and the run is the plan, both epochs."""
    from accelerate.data_loader import prepare_data_loader
    from torch.utils.data import DataLoader
    for p in range(P):
        dl = prepare_data_loader(DataLoader(list(range(N)), batch_size=BS, shuffle=True), num_processes=P,
                                 process_index=p, use_seedable_sampler=True, data_seed=5)
        loader = record_batches(dl, tmp_path, grad_accum=GA)
        for e in range(2):
            assert [b.tolist() for b in loader] == reference_shards(N, P, BS, 5, e)[p]
    flush_ledgers()
    led = read_ledger(tmp_path)
    assert led.states[0][0]["sampler"] == "SeedableRandomSampler" and led.states[0][0]["seed"] == 5
    v = verify_order(led, None, N)
    assert v.findings == [] and v.first_divergent_step is None and v.plan["seed"] == 5, v.findings
