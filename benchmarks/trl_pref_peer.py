"""datacheck's preference-pair cut (``pref.*`` on rendered pairs, :class:`datacheck.derive.pairs.PairCut`)
against TRL's own DPOTrainer preprocessing, on LLaMA-Factory's real ``dpo_en_demo.json`` (300 pairs,
../shared/chat) with the real SmolLM-135M tokenizer given SmolLM2's ChatML template.

TRL is never a dependency of datacheck: put it in a separate environment that sees datacheck's::

    python -m venv /tmp/trlvenv
    echo /path/to/datacheck/.venv/lib/python3.11/site-packages > /tmp/trlvenv/lib/python3.11/site-packages/main.pth
    /tmp/trlvenv/bin/pip install --no-deps trl==1.16.0
    PYTHONPATH=. /tmp/trlvenv/bin/python benchmarks/trl_pref_peer.py [MAX_LENGTH]

What TRL does, per pair (TRL >= 1.9; DPOConfig defaults max_length 1024, truncation_mode
"keep_start"): ``DPOTrainer._prepare_dataset`` tokenizes prompt, prompt + chosen and prompt + rejected
with the chat template and drops the pairs whose prompt alone fills ``max_length``;
``DataCollatorForPreference`` cuts each sequence to ``max_length``. Compared: the rows TRL drops (with
keep_start) and the rows whose collated completion mask is all 0 (TRL 0.29-1.8, which did not drop
them, trains those at the constant loss ln 2), against the count of datacheck's ``pref.identical_pair``
rows whose prompt fills the sequence (``details.prompt_fills``); those rows with the rows whose collated
chosen and rejected sequences are equal, against ``pref.identical_pair``'s rows; with keep_end, no row
may be reported. Prints one line per case,
exit 1 on a difference, 0 with a note when TRL cannot be imported.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" if (ROOT.parent / "shared").is_dir() else Path("/work/shared")
DPO = SHARED / "chat/llamafactory/dpo_en_demo.json"
TOKENIZER = SHARED / "chat/tokenizers/smollm_135m"
#: SmolLM2's published ChatML template (../shared/chat/PROVENANCE.md: no real tokenizer there ships one)
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
ROLE = {"human": "user", "gpt": "assistant", "system": "system"}


def _tokenizer_dir(dest: Path) -> Path:
    """A copy of the SmolLM-135M tokenizer folder with the ChatML template set (the shared one untouched)."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in TOKENIZER.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((dest / "tokenizer_config.json").read_text())
    cfg["chat_template"] = CHATML
    (dest / "tokenizer_config.json").write_text(json.dumps(cfg))
    return dest


def trl_rows(tok_dir: Path, max_length: int, mode: str) -> tuple[set[int], set[int], set[int]]:
    """(rows TRL drops, rows whose collated completions are all cut away, rows whose collated chosen
    and rejected sequences are equal) by TRL's own code."""
    from datasets import Dataset, disable_progress_bars
    from transformers import AutoTokenizer
    from trl import DPOConfig
    from trl.trainer.dpo_trainer import DataCollatorForPreference, DPOTrainer

    disable_progress_bars()
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    rows = json.loads(DPO.read_text())
    ds = Dataset.from_list([{
        "row": i,
        "prompt": [{"role": ROLE[t["from"]], "content": t["value"]} for t in r["conversations"]],
        "chosen": [{"role": "assistant", "content": r["chosen"]["value"]}],
        "rejected": [{"role": "assistant", "content": r["rejected"]["value"]}],
    } for i, r in enumerate(rows)])
    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(output_dir=out, max_length=max_length, truncation_mode=mode, report_to=[], bf16=False, use_cpu=True)
        prepared = DPOTrainer._prepare_dataset(SimpleNamespace(_tokenizer=tok), ds, tok, args, "train")
    kept = set(prepared["row"])
    dropped = set(range(len(rows))) - kept
    coll = DataCollatorForPreference(pad_token_id=tok.pad_token_id or 0, max_length=max_length, truncation_mode=mode)
    empty, same = set(), set()
    for ex in prepared:
        b = coll.torch_call([{k: ex[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")}])
        cm = b["completion_mask"]
        if int(cm[0].sum()) == 0 and int(cm[1].sum()) == 0:
            empty.add(ex["row"])
        ids, am = b["input_ids"], b["attention_mask"]
        if ids[0][am[0].bool()].tolist() == ids[1][am[1].bool()].tolist():
            same.add(ex["row"])
    return dropped, empty, same


def datacheck_rows(tok_dir: Path, max_length: int, mode: str) -> tuple[int, set[int], set[int]]:
    """(pref.identical_pair's prompt_fills count, pref.empty_response rows, pref.identical_pair rows) of
    datacheck's audit."""
    from datacheck.engine.shard import audit_shard
    from datacheck.formats.discovery import discover
    from datacheck.io.hashing import hash_file
    from datacheck.model.config import config_from_dict

    (shard,) = discover([str(DPO)]).shards
    h, size = hash_file(shard.path)
    cfg = config_from_dict({"tokens": {"tokenizer": str(tok_dir), "max_seq_len": max_length,
                                       "truncation_side": "right" if mode == "keep_start" else "left"}})
    res = audit_shard(shard, cfg, h, size, keep_rows=True)

    def rows(cid: str) -> set[int]:
        return {r for k, v in res.failing_rows.items() if k.split(":")[0] == cid for r in v}
    fills = next((f.details.get("prompt_fills", 0) for f in res.findings if f.check == "pref.identical_pair"), 0)
    return fills, rows("pref.empty_response"), rows("pref.identical_pair")


def main(argv: list[str]) -> int:
    try:
        import trl
    except ImportError:
        print("trl is not importable: nothing compared (see the module docstring)")
        return 0
    if not DPO.is_file():
        print(f"{DPO} not present: nothing compared")
        return 0
    lengths = [int(a) for a in argv] or [1024, 512]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        tok_dir = _tokenizer_dir(Path(tmp) / "chatml")
        for max_length in lengths:
            for mode in ("keep_start", "keep_end"):
                dropped, cut_away, same = trl_rows(tok_dir, max_length, mode)
                filled, empty, identical = datacheck_rows(tok_dir, max_length, mode)
                trl_filled = dropped | cut_away  # TRL >= 1.9 drops them; without the drop they collate empty
                good = filled == len(trl_filled) and not empty and identical == same | trl_filled
                ok &= good
                print(f"trl {trl.__version__} max_length={max_length} {mode}: TRL drops {len(dropped)}, collates "
                      f"{len(cut_away)} with no completion token, {len(same - trl_filled)} identical with some; "
                      f"datacheck pref.identical_pair {len(identical)} ({filled} prompt fills), pref.empty_response "
                      f"{len(empty)}: {'same rows' if good else 'DIFFERENT'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
