"""Writes the generated reference pages of docs/ from the code that defines them:

- ``docs/checks.md``: every check ID of the catalog (``datacheck.model.catalog``), with its level,
  default severity, one-line summary and what it needs to run (roles, config facts, as the registry
  that runs the checks declares them, read through ``datacheck.listing.list_checks``);
- ``docs/config.md``: every ``datacheck.toml`` key (``datacheck.model.config``): section, type,
  default and limits read from the pydantic models; the meaning from the field's own description or,
  for a field without one, from :data:`MEANINGS` below (a key without either stops the script).

Run from the repository root::

    python docs/gen_reference.py           # rewrite both pages
    python docs/gen_reference.py --check   # exit 1 when a page differs from what the code gives now

``tests/contract/test_docs_current.py`` runs the check.
"""
from __future__ import annotations

import argparse
import sys
import types
import typing
from pathlib import Path
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout: the checkout's datacheck
    sys.path.insert(0, str(ROOT))

from datacheck.listing import list_checks  # noqa: E402
from datacheck.model import config as cfgmod  # noqa: E402
from datacheck.model.layouts import LAYOUT_NAMES  # noqa: E402
from datacheck.model.roles import CLASS_TARGET_NAMES, NAME_LABELS, ROLE_SPECS, TARGET_NAMES  # noqa: E402

CHECKS_MD = ROOT / "docs" / "checks.md"
CONFIG_MD = ROOT / "docs" / "config.md"

#: the meaning of each key whose pydantic field carries no description (``section.key``).
MEANINGS: dict[str, str] = {
    "dataset.format": "how shard files are recognized: `auto` by extension (a `.json` file is sniffed: JSON "
                      "Lines, or one JSON array of records); a forced format applies to files with a data "
                      "extension of that format (or none), never to code, docs or metadata",
    "dataset.index": "a committed data index (`datacheck index build DATA -o index.json`) the shard set is "
                     "verified against (`index.*`); relative to the config file's folder",
    "dataset.header": "csv/tsv: the first line holds the column names",
    "dataset.names": "csv/tsv without a header: the column names, in order",
    "dataset.quote_char": "csv/tsv quote character; `\"\"` turns quoting off (TSVs whose text holds bare quotes)",
    "dataset.schema": "the data contract (`schema.*`): a built-in layout name (`causal_lm`, `seq2seq`, "
                      "`text_classification`, `token_classification`, `tabular`, `chat_sft`, `sft_tokenized`, "
                      "`packed_lm`, `dpo`, `ctc`, `raw_text`), a Pandera `.yaml`/`.json` file, or `file.py:Class` (imports, "
                      "i.e. runs, that file: formats.md, untrusted data); a file is relative to the config "
                      "file's folder",
    "tokens.vocab_size": "embedding rows: token ids must lie in `[0, vocab_size)` (`tokens.out_of_vocab`, "
                         "`tokens.dtype_overflow`)",
    "tokens.pad_token_id": "the padding id (`padding.*`, `empty.all_padding`)",
    "tokens.eos_token_id": "the end-of-sequence id (`padding.eos_unsupervised`; a stop id of the `sft.*` rules)",
    "tokens.max_seq_len": "the model's context length (`length.over_max`, `sft.truncated_response`; DPO "
                          "pairs are truncated at it as TRL does)",
    "tokens.padding_side": "where padding sits (`right` or `left`); unset: each shard's side is recognized from its first 1,000 rows' attention_mask (left when some of them are padded on the left only and none on the right only, right for the converse or when both occur; a row all padding tells no side; when none of them is padded, each row is judged on the side it is padded on)",
    "tokens.truncation_side": "which end a tokenizer cuts (`right` or `left`)",
    "tokens.bos_token_id": "the beginning-of-sequence id (`sft.double_bos`)",
    "labels.classes": "the class names or values (instead of `num_classes`; the two must agree when both are set)",
    "labels.ignore_index": "the label the loss ignores; `false`: no ignore index",
    "labels.target_kind": "`regression` (any finite value) or `binary` (BCE / multi-label targets in `[0, 1]`)",
    "numeric.compute_dtype": "the training dtype: its maximum is the overflow threshold of `finite.fp16_overflow` "
                             "(fp16 65504, bf16 3.39e38, fp32 3.40e38)",
    "numeric.overflow_warn_fraction": "values above this fraction of the dtype's maximum (and not above it) "
                                      "are a warning",
    "sft.response_template_ids": "the token ids that open an assistant turn (TRL's response template); with "
                                 "`[tokens] eot_token_ids` they delimit the assistant spans when the data has "
                                 "no `assistant_mask`",
    "report.max_examples": "example rows kept per finding (`rows`, `lines`, `examples`)",
    "batch.drop_last": "the DataLoader's `drop_last` (the sampler itself never drops)",
    "batch.seed": "the sampler's seed (`DistributedSampler(seed=...)`; token-budget batching: ties and batch order)",
    "batch.shuffle": "the sampler shuffles (`DistributedSampler(shuffle=...)`; `sampler = \"random\"` is `DataLoader(shuffle=True)`: true)",
    "batch.epochs": "epochs the run trains: the plan covers epochs `0 .. epochs-1`",
    "dup.near": "run `dup.near_duplicate` (MinHash LSH over 5-gram shingles; off by default: the costliest pass)",
    "dup.near_threshold": "estimated Jaccard similarity at or above which two rows are near-duplicates",
    "policy.severity": "the severity this check's findings get (`error` | `warn` | `info`)",
    "policy.max_count": "the check's findings do not fail the policy while its count over the whole dataset "
                        "(the sum of its findings' counts: every shard and column) is at most this",
    "policy.max_ratio": "the check's findings do not fail the policy while that dataset-wide count over the "
                        "dataset's rows is at most this (a check with dataset-level findings only: each "
                        "finding's own ratio)",
    "policy.ignore": "drop this check's findings: they are left out of the report and every output, not only "
                     "of the policy decision (the report's `config_hash` covers the entry)",
}

#: what each section is for (the page's headings).
SECTIONS: dict[str, str] = {
    "dataset": "how shards are found and parsed",
    "columns": "role = column(s); a role left out is inferred from Hugging Face column names (the report "
               "records which roles were inferred)",
    "tokens": "tokenizer facts",
    "labels": "the label domain",
    "numeric": "float values against the training dtype",
    "sft": "supervised fine-tuning",
    "pref": "how the preference trainer (TRL's DPOTrainer or LLaMA-Factory) cuts prompt + response to `[tokens] "
            "max_seq_len`, for the pairs the `pref.*` rules judge as rendered by `[tokens] tokenizer`'s chat template "
            "(named as the trainers' arguments; not part of `config_hash` while every key is at its default)",
    "batch": "the trainer's batching, simulated for the `batch.*` checks and `datacheck plan` (needs the torch extra)",
    "megatron": "the facts of a Megatron-LM run that decide its sample order: `datacheck plan` and `trace --data` "
                "over Megatron .bin/.idx pairs follow GPTDataset and MegatronPretrainingSampler with them (named as "
                "Megatron's arguments; not part of `config_hash` while every key is at its default)",
    "splits": "split name = glob, or a list of globs, relative to the audited root; rows of one split found in another are "
              "`dup.split_overlap`",
    "policy": "per check ID (a key must be a catalog ID): severity override and thresholds under which the "
              "finding does not fail",
    "report": "how much of each finding the report keeps",
    "dup": "near-duplicate detection",
    "trace": "the thresholds of `datacheck trace`'s spike and training-dynamics rules (not part of `config_hash`)",
}


def _type(ann: Any) -> str:
    """A field annotation as a reader writes it: ``int | None``, ``"right" | "left"``, ``list[int]``."""
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return " | ".join("false" if a is False else f'"{a}"' if isinstance(a, str) else str(a)
                          for a in typing.get_args(ann))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type(a) for a in typing.get_args(ann) if a is not type(None))
    if origin in (list, dict):
        return f"{origin.__name__}[{', '.join(_type(a) for a in typing.get_args(ann))}]"
    if ann is type(None):
        return "none"
    return {str: "string", int: "int", float: "float", bool: "bool"}.get(ann, getattr(ann, "__name__", str(ann)))


def _limits(metadata: list[Any]) -> str:
    parts = []
    for m in metadata:
        if isinstance(m, Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, Ge):
            parts.append(f">= {m.ge}")
        elif isinstance(m, Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, Le):
            parts.append("<= 2**63 - 1" if m.le == 2**63 - 1 else "<= 2**31 - 1" if m.le == 2**31 - 1
                         else f"<= {m.le:,}" if isinstance(m.le, int) and m.le >= 10_000 else f"<= {m.le}")
        elif isinstance(m, MinLen):
            parts.append(f"at least {m.min_length} item(s)")
        elif isinstance(m, MaxLen):
            parts.append(f"at most {m.max_length} item(s)")
    return ", ".join(parts)


def _default(value: Any) -> str:
    if value is PydanticUndefined or value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str):
        return f"`'{value}'`" if '"' in value else f'`"{value}"`'
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(section: str, model: type[BaseModel]) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        where = f"{section}.{key}"
        meaning = field.description or MEANINGS.get(where)
        if section == "columns" and meaning is None:
            spec = ROLE_SPECS[key]
            names = ", ".join(f"`{n}`" for n in spec.infer)
            meaning = (f"the `{key}` role" + (f"; inferred from a column named {names}" if names else "; never inferred")
                       + ("; a list of column groups whose lists align per row" if spec.arity == "groups" else ""))
            if key == "label":
                meaning += ("; else, with neither, a string column named " + " or ".join(f"`{n}`" for n in NAME_LABELS)
                            + " (a class name) when only one exists, or an integer or Boolean column named "
                            + ", ".join(f"`{n}`" for n in CLASS_TARGET_NAMES) + " (scikit-learn's `y`, Kaggle's `target`)")
            if key == "target":
                meaning = ("the `target` role; inferred, when no class label is found, from a float column named "
                           + ", ".join(f"`{n}`" for n in TARGET_NAMES) + " (the first present)")
        if meaning is None:
            raise SystemExit(f"docs/gen_reference.py: no meaning for {where}: give the field a description "
                             "or add it to MEANINGS")
        limits = _limits(field.metadata)
        if name == "separator":
            limits = "one character"
        elif name == "quote_char":
            limits = 'one character or ""'
        elif name == "classes":
            limits = "distinct values"
        rows.append(f"| `{key}` | {_cell(_type(field.annotation))} | {_default(field.default)} | "
                    f"{_cell(limits)} | {_cell(meaning)} |")
    return rows


def config_page() -> str:
    out = [
        "# `datacheck.toml` reference",
        "",
        "<!-- generated by docs/gen_reference.py from datacheck/model/config.py; do not edit by hand -->",
        "",
        "Every key is optional. Unknown keys and wrong types are a usage error (exit 2) that names the key, "
        "before any shard is read. Paths written in the file (`[dataset] schema`, `[dataset] index`, "
        "`[tokens] tokenizer`) are relative to the file's own folder.",
        "",
        "Which file is used: `--config FILE` (the API's `config=`); else `./datacheck.toml`; else "
        "`datacheck.toml` in the folder holding the PATHs, then in each parent (at most 8 folders, stopping "
        "after a repository root, never the home folder or above; an object-store PATH is never searched). "
        "The output's second line and the report's `config_path` say which one was used. A config found by "
        "itself may not name a Python schema ([formats.md](formats.md#untrusted-data)).",
        "",
        "A check whose facts are missing (e.g. no `vocab_size`) does not run and is listed under `skipped` "
        "with the reason. `datacheck checks ID` lists the facts each check needs.",
        "",
    ]
    models: dict[str, Any] = {}
    for name, field in cfgmod.Config.model_fields.items():
        models[name] = field.annotation
    order = ["dataset", "columns", "tokens", "labels", "numeric", "sft", "pref", "batch", "megatron", "splits", "policy",
             "report", "dup", "trace"]
    missing = set(models) - set(order)
    if missing:
        raise SystemExit(f"docs/gen_reference.py: sections without a place on the page: {sorted(missing)}")
    head = "| key | type | default | limits | meaning |\n|---|---|---|---|---|"
    for section in order:
        out += [f"## `[{section}]`", "", SECTIONS[section][0].upper() + SECTIONS[section][1:] + ".", ""]
        if section == "splits":
            out += ["| key | type | default | meaning |", "|---|---|---|---|",
                    "| any split name (`train`, `test`, ...) | string (a glob), or a list of globs | none | the shards of that split (a shard matching several splits belongs to the first); plan and trace order its rows glob by glob in the list's order, each glob's shards sorted (as load_dataset orders data_files patterns) |", "",
                    "A Hugging Face `DatasetDict` folder (`dataset_dict.json`) needs no `[splits]`: the splits it "
                    "declares are used unless the config names its own.", ""]
            continue
        if section == "policy":
            out += ['Each entry: `"check.id" = { severity = "error", max_ratio = 0.01 }`.', "", head,
                    *_rows("policy", cfgmod.PolicyEntry), ""]
            continue
        out += [head, *_rows(section, models[section]), ""]
    out += ["## Example", "", "```toml", EXAMPLE.strip(), "```", ""]
    return "\n".join(out)


EXAMPLE = """
[dataset]
schema = "causal_lm"
index = "index.json"

[columns]
input_ids = "input_ids"
labels = "labels"

[tokens]
vocab_size = 50257
pad_token_id = 50256
eos_token_id = 50256
max_seq_len = 1024

[labels]
ignore_index = -100

[numeric]
compute_dtype = "bf16"

[batch]
batch_size = 8
world_size = 8
grad_accum = 4

[splits]
train = "train/*"
test = "test/*"

[policy]
"dup.exact_in_shard" = { severity = "error", max_ratio = 0.01 }
"""


def checks_page() -> str:
    entries = list_checks()
    first = {e.family: i for i, e in reversed(list(enumerate(entries)))}
    entries.sort(key=lambda e: first[e.family])  # families together, in catalog order (stable)
    out = [
        "# Check catalog",
        "",
        "<!-- generated by docs/gen_reference.py from datacheck/model/catalog.py and the check registry; "
        "do not edit by hand -->",
        "",
        "The check IDs are a public contract: reports, `[policy]` entries and users' scripts key on them, "
        "and an ID never changes meaning. `datacheck checks ID` prints one check's full description (what "
        "makes a row fail, thresholds and their source, when it is skipped); `datacheck checks FAMILY` a "
        "family's. A check whose roles or facts are missing is listed under `skipped` in the report with "
        "the reason. Levels: `row` (findings name rows), `shard`, `dataset` (cross-shard); `step` and `run` "
        "are training-log checks of `datacheck trace`. Needs: the column roles and `section.key` "
        "config facts the check declares (`a or b`: either); `-`: none declared (the check judges what the "
        "shard has). Layouts: the layouts the check applies to (`datacheck checks --layout NAME`); on a "
        "shard of another layout it is not applicable (not run, not skipped); `all`: every layout.",
        "",
        f"{len(entries)} check IDs in {len({e.family for e in entries})} families.",
    ]
    family = None
    for e in entries:
        if e.family != family:
            family = e.family
            out += ["", f"## `{family}`", "", "| ID | level | severity | what fails | needs | layouts |",
                    "|---|---|---|---|---|---|"]
        needs = [f"`{r}`".replace("|", " or ") for r in e.roles] + [f"`{f}`".replace("|", " or ") for f in e.facts]
        need = ", ".join(needs) if needs else ("-" if e.built else "")
        if e.note:
            need = (need + "; " if need and need != "-" else "") + e.note
        if not e.built and not e.note:
            need = (need + "; " if need else "") + "not built in this version"
        lays = "" if not e.layouts else "all" if len(e.layouts) == len(LAYOUT_NAMES) else ", ".join(e.layouts)
        out.append(f"| `{e.id}` | {e.level} | {e.severity} | {_cell(e.summary)} | {_cell(need)} | {lays} |")
    out.append("")
    return "\n".join(out)


PAGES = {CHECKS_MD: checks_page, CONFIG_MD: config_page}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 when a page is not what the code gives now")
    args = p.parse_args(argv)
    stale = []
    for path, make in PAGES.items():
        text = make()
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path.relative_to(ROOT).as_posix())
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        print(f"stale: {', '.join(stale)}; run: python docs/gen_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
