"""The Megatron reader's dataset lines (datacheck/trace/readers/megatron.py ``DatasetLines``): the
facts a run prints while it builds its train GPTDataset, in both lineages' wording. The real
BigScience logs (../shared/logs/megatron, PROVENANCE.md) are read for their own numbers, which this
test takes from the log text and its arguments block by its own patterns; the megatron-core lines are
written by tests/helpers/megatronlogs.py with numbers of the reference (tests/helpers/megatronref.py)."""
from __future__ import annotations

import re

import megatronlogs
import megatronref as ref
import pytest
from conftest import SHARED

from datacheck.trace import open_log
from datacheck.trace.readers.megatron import CORE, LEGACY

LOGS = SHARED / "logs" / "megatron"
ITER = ("iteration        3/    1000 | consumed samples:           12 | elapsed time per iteration (ms): 1.0 | "
        "learning rate: 1.0E-04 | global batch size:     4 | lm loss: 2.0E+00 | loss scale: 1.0 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |")


def _lines(path):
    lf = open_log(str(path))
    recs = list(lf.records())
    return lf.stats.dataset_lines, recs


@pytest.mark.parametrize("name", ["meg_gpt2_base_n4-1809579.out", "meg_gpt2_perf_n16.out",
                                  "meg_ds_3d_gpt2_perf_n16-ds-off.out"])
def test_bigscience_logs_dataset_facts(name):
    if not LOGS.is_dir():
        pytest.skip("../shared/logs is not present")
    text = (LOGS / name).read_text(errors="replace")
    arg = dict(re.findall(r"^  (\w+) \.+ (.*?)\s*$", text, re.M))
    asked = int(arg["train_iters"]) * int(arg["global_batch_size"])
    lines, recs = _lines(LOGS / name)
    assert recs  # the iteration lines are still read
    (b,) = lines.train_builds()
    assert b.wording == LEGACY and b.prefix is not None and b.prefix.endswith("openwebtext-10k/meg-gpt2_text_document")
    got = {k: v[0] for k, v in b.facts.items()}
    # what the log prints, found here by the test's own patterns
    rows, epochs = re.search(r"_train_indexmap_.*?total number of samples: (\d+)\s+total number of epochs: (\d+)",
                             text, re.S).groups()  # type: ignore[union-attr]
    assert got == {"sequences": int(re.search(r"number of documents: (\d+)", text).group(1)),  # type: ignore[union-attr]
                   "train_range": (0, 9490), "index_name": (asked, int(arg["seq_length"]), int(arg["seed"])),
                   "samples": int(rows), "epochs": int(epochs)}
    assert got["sequences"] == 10000
    assert lines.run["target"][0] == asked
    # each fact names its line: the line's text is the log's
    lines_of = text.splitlines()
    for v, n, t in b.facts.values():
        assert lines_of[n - 1].strip()[:160] == t


def test_bigscience_numbers():
    if not LOGS.is_dir():
        pytest.skip("../shared/logs is not present")
    small, _ = _lines(LOGS / "meg_gpt2_base_n4-1809579.out")
    big, _ = _lines(LOGS / "meg_gpt2_perf_n16.out")
    # 1000 iterations of global batch 4 (one epoch, 10353 sample-index rows) and of 1024 (99 epochs)
    assert {k: v[0] for k, v in small.train_builds()[0].facts.items()}["samples"] == 10353
    assert (small.train_builds()[0].facts["epochs"][0], big.train_builds()[0].facts["epochs"][0]) == (1, 99)
    assert big.train_builds()[0].facts["samples"][0] == 1024856


@pytest.mark.parametrize("cached", [False, True])
def test_megatron_core_lines(tmp_path, cached):
    sizes = [50 + (i * 37) % 400 for i in range(300)]
    di, si, sh, epochs, (beg, end) = ref.order(sizes, 128, 7, "949,50,1", 1, 2000)
    block = megatronlogs.core_lines("/data/web_text_document", 300, 300, 128, 7, "949,50,1", len(si) - 1,
                                    None if cached else epochs, 2000)
    log = tmp_path / "run.log"
    log.write_text("\n".join(block + [ITER]) + "\n")
    lines, recs = _lines(log)
    assert [r.step for r in recs] == [3]
    (b,) = lines.train_builds()
    assert b.wording == CORE and b.prefix == "/data/web_text_document"
    want = {"sequences": 300, "documents": 300, "samples": len(si) - 1}
    if not cached:
        want["epochs"] = epochs
    assert {k: v[0] for k, v in b.facts.items()} == want
    assert {k: v[0] for k, v in lines.run.items()} == {"target": 2000, "seed": 7, "seq_length": 128,
                                                        "split": "949,50,1"}


def test_a_launch_that_built_twice_keeps_its_last_build_and_rank_prefixes_are_read(tmp_path):
    first = megatronlogs.legacy_lines("/d/a_text_document", 100, [0, 95, 99, 100], 400, 64, 1, 500, 2, 400)
    second = megatronlogs.legacy_lines("/d/a_text_document", 100, [0, 95, 99, 100], 800, 64, 1, 900, 3, 800)
    log = tmp_path / "run.log"
    log.write_text("\n".join(first + [ITER] + ["[rank0]: " + x for x in second] + [ITER]) + "\n")
    lines, _ = _lines(log)
    (b,) = lines.train_builds()
    assert {k: v[0] for k, v in b.facts.items()} == {"sequences": 100, "train_range": (0, 95),
                                                      "index_name": (800, 64, 1), "samples": 900, "epochs": 3}
    assert lines.run["target"][0] == 800


def test_a_real_log_appended_to_itself_is_two_launches_each_with_its_facts(tmp_path):
    """The BigScience base run's log twice in one file (a run restarted from scratch and appended): two
    launches, each beginning at its arguments block, each with the log's own facts (PROVENANCE.md:
    10,000 documents, 1000 iterations of global batch 4: 4000 train samples asked); the first launch's
    facts are no longer replaced by the second's."""
    if not LOGS.is_dir():
        pytest.skip("../shared/logs is not present")
    text = (LOGS / "meg_gpt2_base_n4-1809579.out").read_text(errors="replace")
    log = tmp_path / "two.out"
    log.write_text(text + text)
    lines, recs = _lines(log)
    steps = [r.step for r in recs if r.split == "train"]
    assert steps.index(10, 1) > 0 and steps[steps.index(10, 1) - 1] == 200  # the step counter goes back
    starts = [i for i, t in enumerate((text + text).splitlines(), 1) if re.search(r"-+ arguments -+", t)]
    assert len(starts) == 2
    got = lines.launches()
    assert [x.first_line for x in got] == starts
    for x in got:
        (b,) = x.train_builds()
        assert b.facts["sequences"][0] == 10000 and x.run["target"][0] == 4000 == 1000 * 4
        assert x.args["train_iters"][0] == 1000 and x.args["global_batch_size"][0] == 4
    assert got[0].run["target"][1] < starts[1] < got[1].run["target"][1]  # each fact in its own launch


def test_other_formats_and_lines_hold_none(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ITER + "\n" + "    total number of samples: 12\n" + "number of documents: 5 (not Megatron's)\n")
    lines, _ = _lines(log)
    # a samples line outside a train build is no fact; a stray document count starts a build of that count only
    assert all("samples" not in b.facts for b in lines.builds)


def test_a_prefix_read_only_for_validation_and_threaded_builds_give_no_train_build(tmp_path):
    # --valid-data-path: megatron-core reads that prefix for its valid dataset only
    block = megatronlogs.core_lines("/d/train_text_document", 300, 300, 128, 7, "1", 900, 2, 2000)
    valid = ["INFO:megatron.core.datasets.indexed_dataset:Load the _IndexReader from /d/valid_text_document.idx",
             "INFO:megatron.core.datasets.indexed_dataset:> total number of sequences: 40",
             "INFO:megatron.core.datasets.gpt_dataset:Build and save the GPTDataset valid indices",
             "INFO:megatron.core.datasets.gpt_dataset:> total number of samples: 12"]
    log = tmp_path / "run.log"
    log.write_text("\n".join(block + valid + [ITER]) + "\n")
    lines, _ = _lines(log)
    assert [(b.prefix, b.facts["sequences"][0]) for b in lines.train_builds()] == [("/d/train_text_document", 300)]
    # num_dataset_builder_threads > 1: the prefixes' lines may interleave; none is attributed
    log.write_text("\n".join(x.replace("split_matrix=", "num_dataset_builder_threads=4, split_matrix=")
                             for x in block + [ITER]) + "\n")
    lines, _ = _lines(log)
    assert lines.threaded and lines.train_builds() == [] and lines.run["target"][0] == 2000


def test_numbers_past_64_bits_are_no_facts_and_never_raise(tmp_path):
    big = "9" * 5000  # past Python's int() digit limit: int() would raise
    log = tmp_path / "run.log"
    log.write_text("\n".join([f"    number of documents: {big}", "    train:", f"     document indices in [0, {big}) "
                              f"total of {big} documents", f" > loading doc-idx mapping from /d/a_train_indexmap_{big}ns_"
                              "8sl_1s_doc_idx.npy", f"    total number of samples: {big}", ITER]) + "\n")
    lines, recs = _lines(log)
    assert [r.step for r in recs] == [3]
    assert all(not b.facts for b in lines.builds)


@pytest.mark.parametrize("name", ["meg_gpt2_base_n4-1809579.out", "meg_ds_3d_gpt2_perf_n16-ds-off.out"])
def test_bigscience_arguments_block(name):
    if not LOGS.is_dir():
        pytest.skip("../shared/logs is not present")
    text = (LOGS / name).read_text(errors="replace")
    block = text[text.index("-- arguments --"):text.index("-- end of arguments --")]
    want = {k: (None if v == "None" else v if k == "split" else int(v))
            for k, v in re.findall(r"^  (\w+) \.+ (.*?)\s*$", block, re.M)
            if k in ("seed", "seq_length", "split", "train_iters", "train_samples", "global_batch_size",
                     "micro_batch_size", "data_parallel_size")}
    lines, _ = _lines(LOGS / name)
    assert {k: v[0] for k, v in lines.args.items()} == want
    assert want["seed"] == 1234 and want["seq_length"] == 1024 and want["split"] == "949,50,1"
