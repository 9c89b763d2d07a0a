"""No code from a checkpoint runs: the pickle's globals are named from its opcodes, a file needing a
global beyond tensors and plain containers is never loaded (a ``__reduce__`` that would write a
marker file never writes it), and tensors are read memory-mapped."""
from __future__ import annotations

import io
import json
import pickle
import struct
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT, run_cli

from datacheck.resume.checkpoint import inspect_checkpoint
from datacheck.resume.pickles import UnsafeCheckpoint, load_safe, safetensors_header, scan_file, scan_pickle

torch = pytest.importorskip("torch")


class WritesMarker:
    """Unpickling this calls ``pathlib.Path.write_text`` on the marker: code run by the checkpoint."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import pathlib

        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "pwned"))


def test_a_reduce_that_writes_a_file_is_never_run(tmp_path):
    marker = tmp_path / "marker.txt"
    ck = tmp_path / "ckpt.pt"
    model = torch.nn.Linear(3, 2)
    # an optimizer state dict's shape, without building an optimizer (torch.optim's first use imports
    # torch._dynamo: seconds)
    osd = {"state": {0: {"step": torch.tensor(1.0), "exp_avg": torch.zeros(3)}}, "param_groups": [{"params": [0]}]}
    torch.save({"model": model.state_dict(), "optimizer": osd, "payload": WritesMarker(marker)}, ck)
    fs = scan_file(ck)
    assert fs.kind == "torch_zip"
    # protocol 2 pickles the bound method as getattr(PosixPath, "write_text"): both globals are named
    assert set(fs.unsafe) == {"__builtin__.getattr", "pathlib.Path", "pathlib.PosixPath"}
    with pytest.raises(UnsafeCheckpoint):
        load_safe(fs)
    info = inspect_checkpoint(ck)
    unsafe = [f for f in info.findings if f.check == "ckpt.unsafe_pickle"]
    assert len(unsafe) == 1 and "__builtin__.getattr" in unsafe[0].message and "pathlib.PosixPath" in unsafe[0].message
    assert set(unsafe[0].details["globals"]) == set(fs.unsafe)
    r = run_cli("checkpoint", str(ck), "--format", "json")
    doc = json.loads(r.stdout)["result"]
    assert "ckpt.unsafe_pickle" in [f["check"] for f in doc["findings"]]
    assert doc["files"]["ckpt.pt"]["unsafe"] == fs.unsafe
    assert not marker.exists()  # neither the scan, the inspection nor the CLI ran it


def test_stack_global_and_protocol_5_are_named(tmp_path):
    marker = tmp_path / "m"
    data = pickle.dumps({"x": WritesMarker(marker)}, protocol=5)  # STACK_GLOBAL with memoized strings
    sc = scan_pickle(data)
    assert set(sc.globals) == {"pathlib.Path.write_text", "pathlib.PosixPath"} and sc.error is None
    raw = tmp_path / "raw.pkl"
    raw.write_bytes(data)
    fs = scan_file(raw)
    assert fs.kind == "pickle" and set(fs.unsafe) == {"pathlib.Path.write_text", "pathlib.PosixPath"}
    # a STACK_GLOBAL whose operands are computed (not two plain strings) is named as unresolved
    computed = b"\x80\x04" + b"\x8c\x08builtins" + b"\x8c\x04eval" + b"\x85" + b"\x93" + b"."
    sc2 = scan_pickle(computed)
    assert sc2.unresolved and "STACK_GLOBAL" in sc2.unresolved[0]
    assert not marker.exists()


def test_torchscript_and_a_legacy_file(tmp_path):
    ts = tmp_path / "m.pt"
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(ts))
    fs = scan_file(ts)
    assert fs.kind == "torchscript" and fs.unsafe
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(3)}, legacy, _use_new_zipfile_serialization=False)
    fl = scan_file(legacy)
    assert fl.kind == "torch_legacy" and fl.unsafe == []
    assert torch.equal(load_safe(fl)["w"], torch.ones(3))


def test_zip_scan_reads_data_pkl_only(tmp_path, monkeypatch):
    """The static scan reads the zip's data.pkl member and nothing else of the archive."""
    ck = tmp_path / "big.pt"
    torch.save({"w": torch.zeros(1000, 100)}, ck)
    read: list[str] = []
    orig = zipfile.ZipFile.read

    def spy(self, name, pwd=None):
        read.append(name)
        return orig(self, name, pwd)

    monkeypatch.setattr(zipfile.ZipFile, "read", spy)
    fs = scan_file(ck)
    assert [n.split("/", 1)[1] for n in read] == ["data.pkl"]
    assert fs.globals and not fs.unsafe
    obj = load_safe(fs)  # memory-mapped: the storage is not copied into memory
    assert obj["w"].shape == (1000, 100)


def test_safetensors_header_is_read_alone(tmp_path):
    head = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    p = tmp_path / "model.safetensors"
    p.write_bytes(struct.pack("<Q", len(head)) + head + b"\0" * 8)
    assert safetensors_header(p)["w"]["shape"] == [2]
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10**12) + b"{}")
    with pytest.raises(ValueError, match="over the limit or past the end"):
        safetensors_header(bad)


def test_malformed_pickle_is_not_loaded(tmp_path):
    p = tmp_path / "x.pt"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("x/data.pkl", b"\x80\x02}q\x00(X")  # cut mid-string
    p.write_bytes(buf.getvalue())
    fs = scan_file(p)
    assert fs.error and not fs.loadable
    with pytest.raises(UnsafeCheckpoint):
        load_safe(fs)


_PEAK = """
import sys
from datacheck.resume.checkpoint import inspect_checkpoint
import torch  # noqa: F401 - imported before the baseline is taken

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
before = hwm()
info = inspect_checkpoint(sys.argv[1])
print(hwm() - before, info.steps.get("optimizer.step"), sorted(f.check for f in info.findings))
"""


@pytest.mark.slow
def test_a_large_checkpoint_is_inspected_without_reading_its_tensors(tmp_path):
    """A 300 MB checkpoint (weights and two Adam moments of a 25M-element parameter) is inspected in
    another process whose peak resident memory grows by far less than the file: the tensors are
    memory-mapped and never touched, only the 0-d ``step`` is read."""
    n = 25_000_000
    osd = {"state": {0: {"step": torch.tensor(7.0), "exp_avg": torch.zeros(n), "exp_avg_sq": torch.zeros(n)}},
           "param_groups": [{"params": [0], "lr": 1e-3, "betas": (0.9, 0.999), "initial_lr": 1e-3}]}
    ck = tmp_path / "big.pt"
    torch.save({"model": {"w": torch.zeros(n)}, "optimizer": osd, "scheduler": {"last_epoch": 7, "base_lrs": [1e-3]},
                "step": 7}, ck)
    size = ck.stat().st_size
    assert size > 3 * n * 4
    out = subprocess.run([sys.executable, "-c", _PEAK, str(ck)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True).stdout.split(maxsplit=2)
    grew, step = int(out[0]), out[1]
    assert step == "7"
    assert grew < size / 10, f"peak memory grew by {grew} bytes inspecting a {size}-byte file"
