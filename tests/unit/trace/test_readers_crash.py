"""The Python traceback a crashed run's console ends with (:mod:`datacheck.trace.readers.crash`): named
with its exception line, the line numbers ``grep -n`` gives, and the rank of torchrun's prefix; never
a crash when the word ``Traceback`` is only inside a logged message, nor when a traceback a loop caught
and logged is followed by more training steps, nor when the traceback is cut before its exception."""
from __future__ import annotations

from pathlib import Path

from datacheck.trace import open_log

HEADER = "Traceback (most recent call last):"


def _crash(tmp_path: Path, text: str) -> tuple[dict | None, int | None, int]:
    p = tmp_path / "console.log"
    p.write_bytes(text.encode())
    lf = open_log(str(p))
    list(lf.records())
    return lf.stats.crash, lf.stats.last_step, lf.stats.records


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    at = -1
    for _ in range(nth):
        at = text.index(needle, at + 1)
    return text[:at].count("\n") + 1


def _frames(prefix: str = "") -> str:
    return (f'{prefix}  File "train.py", line 40, in <module>\n{prefix}    logits = model(x)\n'
            f'{prefix}  File "torch/nn/modules/sparse.py", line 190, in forward\n'
            f'{prefix}    return F.embedding(\n{prefix}           ^^^^^^^^^^^^\n')


def test_a_console_ending_in_a_traceback_names_its_exception_line(tmp_path):
    steps = "".join(f"step {s} loss {3 - s / 100:.3f}\n" for s in range(5, 55, 5))
    text = steps + "\r 51/200 [00:03<00:09, 16.1it/s]" + HEADER + "\n" + _frames() \
        + "IndexError: index out of range in self\n"
    crash, _, records = _crash(tmp_path, text)
    assert records == 10
    assert crash == {"line": _line_of(text, "IndexError: index"), "traceback_line": _line_of(text, HEADER),
                     "exception": "IndexError", "message": "index out of range in self",
                     "text": "IndexError: index out of range in self", "rank": None}


def test_torchrun_prefixes_interleaved_name_the_crashed_rank(tmp_path):
    lines = []
    for s in range(10, 60, 10):
        lines += [f"[rank0]: step {s} loss 2.5\n", f"[rank1]: step {s} loss 2.6\n"]
    lines += [f"[rank1]: {HEADER}\n", *[f"[rank1]: {x}\n" for x in _frames().splitlines()],
              " 30%|###       | 60/200 [00:04<00:09, 14.2it/s]\n",  # tqdm between, unprefixed
              "[rank0]: step 60 loss 2.4\n",  # rank 0 logs on: rank 1's crash still stands
              "[rank1]: RuntimeError: CUDA error: device-side assert triggered\n",
              "[rank1]: CUDA kernel errors might be asynchronously reported at some other API call\n"]
    text = "".join(lines)
    crash, last, _ = _crash(tmp_path, text)
    assert crash is not None
    assert (crash["line"], crash["rank"], crash["exception"], crash["message"]) == \
        (_line_of(text, "RuntimeError"), 1, "RuntimeError", "CUDA error: device-side assert triggered")
    assert crash["traceback_line"] == _line_of(text, HEADER)


def test_chained_tracebacks_name_the_last_exception(tmp_path):
    text = ("step 1 loss 2.0\n" + HEADER + "\n" + _frames() + "IndexError: index out of range in self\n\n"
            "During handling of the above exception, another exception occurred:\n\n" + HEADER + "\n"
            + _frames() + "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed\n")
    crash, _, _ = _crash(tmp_path, text)
    assert crash is not None
    assert (crash["exception"], crash["line"], crash["traceback_line"]) == \
        ("torch.distributed.DistBackendError", _line_of(text, "torch.distributed.Dist"), _line_of(text, HEADER, 2))


def test_the_word_traceback_in_a_healthy_run_is_no_crash(tmp_path):
    steps = [f"step {s} loss {3 - s / 100:.3f}\n" for s in range(1, 41)]
    caught = ("WARNING worker 3 retried a shard read after an error:\n" + HEADER + "\n" + _frames()
              + "ConnectionResetError: [Errno 104] Connection reset by peer\n")
    text = "".join(steps[:10]) + "WARNING sample 1234 holds the text 'Traceback (most recent call last):'\n" \
        + f"INFO the loader logged {HEADER}\n" + "".join(steps[10:20]) + caught + "".join(steps[20:])
    crash, _, records = _crash(tmp_path, text)
    assert crash is None and records == 40


def test_a_traceback_cut_before_its_exception_is_no_crash(tmp_path):
    text = "step 1 loss 2.0\nstep 2 loss 1.9\n" + HEADER + "\n" + _frames()
    assert _crash(tmp_path, text)[0] is None


def test_a_rank_crash_followed_by_that_ranks_records_is_no_crash(tmp_path):
    text = (f"[rank0]: step 1 loss 2.0\n[rank0]: {HEADER}\n" + "".join(f"[rank0]: {x}\n" for x in _frames().splitlines())
            + "[rank0]: ValueError: bad sample skipped\n[rank0]: step 2 loss 1.9\n")
    assert _crash(tmp_path, text)[0] is None


def test_torchruns_tee_prefix_before_torchs_own_rank_prefix(tmp_path):
    # torchrun --tee 3: [defaultN]: before the [rankN]: torch prints its traceback with
    frames = "".join(f"[default1]:[rank1]: {x}\n" for x in _frames().splitlines())
    text = ("[default1]:step 5 loss 2.0\n[default0]:step 5 loss 2.0\n[default1]:[rank1]: " + HEADER + "\n" + frames
            + "[default1]:[rank1]: IndexError: index out of range in self\n")
    crash, _, _ = _crash(tmp_path, text)
    assert crash is not None and (crash["rank"], crash["line"]) == (1, _line_of(text, "IndexError: index"))


def test_a_teed_traceback_before_its_ranks_last_stdout_records_still_stands(tmp_path):
    # torchrun --tee tails a rank's stdout and stderr apart: its last step lines may come after its traceback
    tb = (f"[default1]:[rank1]: {HEADER}\n" + "".join(f"[default1]:[rank1]: {x}\n" for x in _frames().splitlines())
          + "[default1]:[rank1]: IndexError: index out of range in self\n")
    text = tb + "[default0]:step 5 loss 3.6\n[default1]:step 5 loss 3.5\n"
    crash, _, _ = _crash(tmp_path, text)
    assert crash is not None and (crash["rank"], crash["line"]) == (1, _line_of(text, "IndexError: index"))
    # a run that went on after it logs on: more records of that rank than a tail's lag holds
    text = "[default1]:step 1 loss 3.9\n" + tb + "".join(f"[default1]:step {s} loss 3.5\n" for s in range(2, 8))
    assert _crash(tmp_path, text)[0] is None
