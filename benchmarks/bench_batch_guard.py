"""BatchGuard overhead: the guard's checks against collate + forward/backward/step of a small model.

A 32 x 1024-token batch (input_ids, attention_mask, labels with ignored prompt tokens) of a small
causal-LM-shaped model (embedding 4096 x 128, 1 transformer encoder layer with a causal mask,
linear head), CrossEntropyLoss(ignore_index=-100), SGD step.

One process, ``--repeats`` rounds; each round times, back to back on the same batch:

1. ``default_collate`` of the 32 samples (what the DataLoader does anyway);
2. ``BatchGuard.check`` of that collated batch (everything the guard adds to the collate: every
   check of a passing batch and its one host sync);
3. forward + backward + SGD step on it;
4. ``BatchGuard(default_collate)(samples)``, the wrapped collate as a trainer calls it (collate + check).

The overhead figure is the median over rounds of ``(2) / ((1) + (3))``: the guard's time as a share
of the step it protects, both measured in the same round under the same load (a ratio per round, so
a load change between rounds does not bias it). The end-to-end figure ``(4) - (1)`` is printed too:
it is the same work plus timer noise.

    PYTHONPATH=. python benchmarks/bench_batch_guard.py [--repeats 15] [--threads 2]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from datacheck.torch import BatchGuard

VOCAB, SEQ, BATCH = 4096, 1024, 32


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 128)
        layer = nn.TransformerEncoderLayer(128, 4, 256, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 1)
        self.head = nn.Linear(128, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        return self.head(self.body(self.emb(ids), mask=mask, is_causal=True))


def samples() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(BATCH):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=g)
        labels = ids.clone()
        labels[:128] = -100
        out.append({"input_ids": ids, "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": labels})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15, help="timed rounds (after one warm-up round)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Small()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    data = samples()
    collate = torch.utils.data.default_collate
    guard = BatchGuard(collate, facts={"tokens": {"vocab_size": VOCAB}, "labels": {"ignore_index": -100}})

    def one_round() -> tuple[float, float, float, float]:
        t0 = time.perf_counter()
        b = collate(data)
        t1 = time.perf_counter()
        failures = guard.check(b)
        t2 = time.perf_counter()
        loss = loss_fn(model(b["input_ids"]).reshape(-1, VOCAB), b["labels"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        t3 = time.perf_counter()
        guard(data)
        t4 = time.perf_counter()
        assert not failures, failures  # a passing batch: the guard's common case
        return t1 - t0, t2 - t1, t3 - t2, t4 - t3

    one_round()  # warm-up
    rounds = [one_round() for _ in range(args.repeats)]
    col = [r[0] for r in rounds]
    chk = [r[1] for r in rounds]
    fb = [r[2] for r in rounds]
    wrapped = [r[3] for r in rounds]
    ratios = [c / (a + f) for a, c, f in zip(col, chk, fb)]
    med = statistics.median
    print(f"torch {torch.__version__}, {args.threads} thread(s), batch {BATCH} x {SEQ} tokens, "
          f"{args.repeats} rounds (medians)")
    print(f"collate {med(col) * 1e3:.2f} ms; fwd/bwd/step {med(fb) * 1e3:.1f} ms; "
          f"BatchGuard checks {med(chk) * 1e3:.3f} ms; wrapped collate {med(wrapped) * 1e3:.2f} ms")
    print(f"overhead = checks / (collate + fwd/bwd/step): median {100 * med(ratios):.4f}% "
          f"(rounds: min {100 * min(ratios):.4f}%, max {100 * max(ratios):.4f}%; goal <= 2%)")
    print(f"end to end: wrapped - plain collate = {(med(wrapped) - med(col)) * 1e3:.3f} ms "
          f"= {100 * (med(wrapped) - med(col)) / (med(col) + med(fb)):.4f}% of the step")


if __name__ == "__main__":
    main()
