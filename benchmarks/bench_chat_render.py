"""Benchmark: rendering chat conversations through the tokenizer's chat template ([tokens]
tokenizer), the one per-row Python step of the sft rules, against the audit without rendering.

Material: FastChat's real dummy_conversation.json (500 ShareGPT conversations, /work/shared/chat),
repeated --copies times into one JSONL shard; the SmolLM-135M tokenizer with SmolLM2's ChatML
template ({% generation %} around the assistant content) written into a temporary folder. Measured
in the same run (median of --repeat):

- render: ``datacheck.derive.chat.render_chat`` alone (transformers' ``apply_chat_template``, batched);
- audit_plain: ``datacheck.audit`` of the shard without a tokenizer (structural sft rules only);
- audit_render: the same with ``[tokens] tokenizer`` (rendering + the tokenized sft rules).

Prints conversations/s and tokens/s of the render step and the ratio audit_render / audit_plain.
Usage: python benchmarks/bench_chat_render.py [--copies 20] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

CHAT = Path("/work/shared/chat")
CHATML_GEN = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
              "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}"
              "{% endgeneration %}{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\\n' }}{% endfor %}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import polars as pl

    import datacheck
    from datacheck.derive.chat import load_chat_tokenizer, render_chat
    from datacheck.derive.messages import template_turns
    from datacheck.model.roles import message_fields

    work = Path(tempfile.mkdtemp(prefix="bench_chat_"))
    try:
        tok_dir = work / "tok"
        shutil.copytree(CHAT / "tokenizers/smollm_135m", tok_dir)
        cfgj = json.loads((tok_dir / "tokenizer_config.json").read_text())
        cfgj["chat_template"] = CHATML_GEN
        (tok_dir / "tokenizer_config.json").write_text(json.dumps(cfgj))
        rows = json.loads((CHAT / "fastchat/dummy_conversation.json").read_text()) * a.copies
        data = work / "data"
        data.mkdir()
        shard = data / "chat.jsonl"
        shard.write_text("".join(json.dumps(r) + "\n" for r in rows))
        df = pl.read_ndjson(shard)
        mf = message_fields(df.schema["conversations"])
        convs = df.select(template_turns("conversations", mf).alias("t"))["t"].to_list()  # type: ignore[arg-type]
        tok, _ = load_chat_tokenizer(str(tok_dir))
        cfg_plain = {"tokens": {"eot_token_ids": [2]}}
        cfg_render = {"tokens": {"eot_token_ids": [2], "tokenizer": str(tok_dir)}}
        times: dict[str, list[float]] = {"render": [], "audit_plain": [], "audit_render": []}
        tokens = 0
        for _ in range(a.repeat):
            t = time.perf_counter()
            out = render_chat(convs, tok, None, "right", -100)
            times["render"].append(time.perf_counter() - t)
            tokens = out.tokens
            for key, cfg in (("audit_plain", cfg_plain), ("audit_render", cfg_render)):
                t = time.perf_counter()
                datacheck.audit(str(shard), cfg)  # no cache_dir: no result cache
                times[key].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{len(convs)} conversations, {tokens} tokens (median of {a.repeat})")
        print(f"render: {med['render']:.2f} s = {len(convs) / med['render']:.0f} conversations/s, "
              f"{tokens / med['render']:.0f} tokens/s")
        print(f"audit without tokenizer: {med['audit_plain']:.2f} s; with rendering: {med['audit_render']:.2f} s; "
              f"ratio {med['audit_render'] / med['audit_plain']:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
