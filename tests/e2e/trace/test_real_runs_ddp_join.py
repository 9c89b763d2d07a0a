"""Two processes over gloo with uneven inputs under DDP's ``Join`` (tests/helpers/ddpjoin.py: 7 and 6
batches an epoch, batch size 1, 2 epochs, each through ``record_batches``): what docs/torch.md ("Uneven
inputs joined") says. Each process's ledger counts its own steps (process 1's step ``N`` is its own
``N``-th batch). Which batches meet in one all-reduce depends on where ``Join`` is entered: around the
whole run, process 0's step ``N`` meets process 1's own step ``N`` (none at process 0's last 2 steps);
around each epoch, process 1 waits out process 0's last step of every epoch, so from epoch 1 on process
0's step ``N`` meets process 1's own step ``N - 1`` (the longest share's numbering). Every expected row is
computed from the shares, never read back from datacheck; the met rows are the gradients' own."""
from __future__ import annotations

import json

import pytest
from ddpjoin import SHARES, rows_of, spawn_join

from datacheck.execute.plan import rows_of_step
from datacheck.io.ledger import read_ledger

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # two processes over gloo
EPOCHS = 2


def _own(rank: int) -> list[list[int]]:
    """Process ``rank``'s batches in its own step order."""
    return [[r] for e in range(EPOCHS) for r in rows_of(rank, e)]


@pytest.mark.parametrize("mode", ["run", "epoch"])
def test_which_batches_meet_under_join(tmp_path, mode):
    spawn_join(2, tmp_path, mode, EPOCHS)
    met = json.loads((tmp_path / "met.json").read_text())
    own = {p: _own(p) for p in (0, 1)}
    assert len(met) == len(own[0]) == EPOCHS * SHARES[0]
    if mode == "run":  # the k-th backward of every process pairs: process 1's own step k
        partner = [own[1][k] if k < len(own[1]) else [] for k in range(len(own[0]))]
    else:  # each epoch: process 1's own steps of that epoch, none at process 0's last
        partner = [[rows_of(1, e)[k]] if k < SHARES[1] else [] for e in range(EPOCHS) for k in range(SHARES[0])]
        # from epoch 1 on, process 0's step N met process 1's own step N - 1
        assert partner[SHARES[0]:] == [own[1][n - 1] if n - 1 < len(own[1]) else []
                                       for n in range(SHARES[0], len(own[0]))][:SHARES[1]] + [[]]
    assert met == [sorted(own[0][k] + partner[k]) for k in range(len(own[0]))]
    led = read_ledger(tmp_path / "run")
    for p in (0, 1):  # the ledger: each process's own count, whatever the join
        assert [[b.global_index for b in rows_of_step(led, k, rank=p)] for k in range(len(own[p]))] == own[p]
