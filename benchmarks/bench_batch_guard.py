"""BatchGuard overhead: collate + forward/backward of a small model, with and without the guard.

A 32 x 1024-token batch (input_ids, attention_mask, labels with ignored prompt tokens) of a small
causal-LM-shaped model (embedding 4096 x 128, 1 transformer encoder layer with a causal mask,
linear head), CrossEntropyLoss(ignore_index=-100), SGD step. Each timing is the median of
``--repeats`` alternating rounds in one process, so the ratio is measured under the same load.

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
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Small()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    data = samples()
    collate = torch.utils.data.default_collate
    guard = BatchGuard(collate, facts={"tokens": {"vocab_size": VOCAB}, "labels": {"ignore_index": -100}})

    def step(fn) -> float:
        t = time.perf_counter()
        b = fn(data)
        loss = loss_fn(model(b["input_ids"]).reshape(-1, VOCAB), b["labels"].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - t

    def check_only() -> float:
        b = collate(data)
        t = time.perf_counter()
        guard.check(b)
        return time.perf_counter() - t

    step(collate), step(guard)  # warm-up
    plain, guarded, checks = [], [], []
    for _ in range(args.repeats):
        plain.append(step(collate))
        guarded.append(step(guard))
        checks.append(check_only())
    p, g, c = statistics.median(plain), statistics.median(guarded), statistics.median(checks)
    print(f"torch {torch.__version__}, {args.threads} thread(s), batch {BATCH} x {SEQ} tokens, {args.repeats} rounds")
    print(f"collate + fwd/bwd/step: {p * 1e3:.1f} ms; with BatchGuard: {g * 1e3:.1f} ms")
    print(f"guard checks alone: {c * 1e3:.2f} ms = {100 * c / p:.4f}% of the step "
          f"(end-to-end ratio {g / p:.3f})")


if __name__ == "__main__":
    main()
