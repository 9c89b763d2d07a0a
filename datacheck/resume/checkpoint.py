"""``datacheck checkpoint PATH``: what a training checkpoint holds for a lossless resume (``ckpt.*``).

A lossless resume restores seven pieces: the model **weights**, the **optimizer** state (its moment
buffers, per parameter group), the learning-rate **scheduler**, the fp16 loss **scaler**, the **RNG**
states (python, numpy, torch, CUDA; one per rank), the **sampler** / dataloader position and the
**step**. This module finds which are present in the layouts trainers write, and whether their step
counts agree; each missing piece is a finding that says what it does to the resumed run. A piece
there by its file or key and holding nothing (None, an empty dict, an optimizer ``state`` without
moments past step 0, a scaler state with no scale, weights with no tensor) is missing too, and its
finding says what it holds.

Layouts (:func:`detect_layout`):

- ``hf_trainer``: a Hugging Face ``Trainer`` ``checkpoint-N/`` folder (``model.safetensors`` or
  ``pytorch_model.bin`` or a sharded index, ``optimizer.pt``, ``scheduler.pt``, ``scaler.pt``,
  ``rng_state.pth`` or ``rng_state_<rank>.pth``, ``trainer_state.json``); an output folder holding
  several is judged by its last ``checkpoint-N`` (what ``resume_from_checkpoint=True`` picks). The
  Trainer rebuilds the data position from ``global_step`` and the seed, so a missing sampler state is
  a finding only without ``trainer_state.json``. Under DeepSpeed the folder also holds the engine's
  ``latest`` and ``global_stepN/``, which hold the optimizer, the loss scaler and (when DeepSpeed owns
  it) the scheduler.
- ``accelerate``: an ``Accelerator.save_state`` folder (``model*.safetensors``/``pytorch_model*.bin``,
  ``optimizer*.bin``, ``scheduler*.bin``, ``sampler*.bin`` / ``dl_state_dict*.bin``, ``scaler.pt``,
  ``random_states_<rank>.pkl``). accelerate restores no data position unless one of the sampler
  files is there (the loop must call ``skip_first_batches`` itself).
- ``lightning``: a Lightning ``.ckpt`` (``state_dict``, ``optimizer_states``, ``lr_schedulers``,
  ``loops``, ``callbacks``, ``MixedPrecision``). Lightning saves no RNG state, and on a mid-epoch
  resume restarts the epoch's data order unless the dataloader is stateful (its warning "resuming
  from a checkpoint that ended before the epoch ended").
- ``deepspeed``: a folder with ``latest`` (the tag) and ``global_stepN/``, or the tag folder itself
  (``mp_rank_XX_model_states.pt``, ``[bf16_]zero_pp_rank_D_mp_rank_XX_optim_states.pt`` per
  data-parallel rank under ZeRO). DeepSpeed saves no RNG and no data position of its own.
- ``dcp``: a ``torch.distributed.checkpoint`` folder (``.metadata`` + ``__<rank>_<n>.distcp``):
  pieces from the metadata's keys, every storage file the metadata names must exist.
- ``torch_save``: any other ``torch.save`` file of a dict (``model``, ``optimizer``, ...): pieces
  recognised by their shape (an optimizer state dict has ``state`` and ``param_groups``, a scheduler
  ``last_epoch``, a GradScaler ``scale`` and ``growth_factor``, ...).

No code from the checkpoint ever runs: see :mod:`datacheck.resume.pickles` (static opcode scan,
allowlist, then ``torch.load(weights_only=True, mmap=True)``). A file that needs another global is a
``ckpt.unsafe_pickle`` finding naming the globals and is never loaded; what it holds is then judged
from its name alone (and said so).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datacheck.io.bounded import dangling_link
from datacheck.io.safejson import read_json_file
from datacheck.model import catalog
from datacheck.model.errors import UsageError
from datacheck.model.findings import Finding
from datacheck.resume.pickles import (
    FileScan,
    UnsafeCheckpoint,
    load_dcp_metadata,
    load_safe,
    safetensors_header,
    scan_file,
)

__all__ = ["PIECES", "Piece", "CheckpointInfo", "inspect_checkpoint", "detect_layout", "LAYOUTS", "resumable",
           "GRADSCALER_INIT_SCALE", "summary_lines", "optimizer_detail"]

#: the pieces of a lossless resume, in the order they are listed
PIECES = ("weights", "optimizer", "scheduler", "scaler", "rng", "sampler", "step")
LAYOUTS = ("hf_trainer", "accelerate", "lightning", "deepspeed", "dcp", "torch_save")
#: torch.amp.GradScaler's default ``init_scale`` (what a lost scaler restarts from)
GRADSCALER_INIT_SCALE = 65536.0
#: RNG generators a rank's state should hold (CUDA only when the run used it)
RNG_KINDS = ("python", "numpy", "torch", "cuda")
_HF_RNG = re.compile(r"^rng_state(?:_(\d+))?\.pth$")
_ACC_RNG = re.compile(r"^random_states_(\d+)\.pkl$")
_CKPT_DIR = re.compile(r"^checkpoint-(\d+)$")
_DS_TAG = re.compile(r"^global_step(\d+)$")
_DS_OPTIM = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt$")
_DS_MODEL = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
_DCP_FILE = re.compile(r"^__(\d+)_(\d+)\.distcp$")


@dataclass
class Piece:
    """One piece of resume state.

    Attributes:
        present: whether the checkpoint holds it.
        files: the files it was found in (relative to the checkpoint).
        detail: what was read (optimizer groups and buffers, the scheduler's ``last_epoch``, the RNG
            generators per rank, ...).
        note: how it was judged when not read (a file not loaded, a layout that never saves it).
    """

    present: bool = False
    files: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"present": self.present, "files": self.files, "detail": self.detail, "note": self.note}


@dataclass
class CheckpointInfo:
    """What ``datacheck checkpoint`` found.

    Attributes:
        path: the checkpoint given.
        root: the checkpoint judged (the last ``checkpoint-N`` of an output folder, DeepSpeed's tag folder).
        layout: one of :data:`LAYOUTS`.
        pieces: piece name -> :class:`Piece` (every name of :data:`PIECES`).
        steps: where a step count was read -> the step (``folder``, ``trainer_state.global_step``,
            ``scheduler.last_epoch``, ``optimizer.step``, ...).
        ranks: the ranks whose per-rank files were found.
        world_size: the ranks expected (``--world-size``, the layout's own record, else the highest rank found + 1).
        files: relative path -> the static scan of each file read.
        findings: the ``ckpt.*`` findings.
        notes: what could not be judged, and why.
    """

    path: Path
    root: Path
    layout: str
    pieces: dict[str, Piece] = field(default_factory=lambda: {p: Piece() for p in PIECES})
    steps: dict[str, int] = field(default_factory=dict)
    ranks: list[int] = field(default_factory=list)
    world_size: int | None = None
    files: dict[str, FileScan] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: relative path -> why the file cannot be loaded by anyone (not a torch.save file, a cut or
    #: corrupt archive or pickle, not a regular file): its piece is not present (not in ``to_dict``)
    unusable: dict[str, str] = field(default_factory=dict)
    #: optimizer state dicts with params lacking moment buffers, judged before any step was read
    #: (``where``, :func:`optimizer_detail`): judged once every step is read (not in ``to_dict``)
    bare_optimizers: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def step(self) -> int | None:
        """The checkpoint's step: the folder's, else the first one read."""
        if "folder" in self.steps:
            return self.steps["folder"]
        return next(iter(self.steps.values()), None)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "root": str(self.root), "layout": self.layout, "step": self.step,
                "pieces": {k: v.to_dict() for k, v in self.pieces.items()}, "steps": self.steps,
                "ranks": self.ranks, "world_size": self.world_size,
                "files": {k: v.to_dict() for k, v in sorted(self.files.items())},
                "findings": [f.to_dict() for f in self.findings], "notes": self.notes}

    def missing(self) -> list[str]:
        """The check IDs of the findings (what the checkpoint lacks), in finding order."""
        return list(dict.fromkeys(f.check for f in self.findings))


def _finding(cid: str, message: str, count: int = 1, **details: Any) -> Finding:
    sev = catalog.info(cid).severity
    return Finding(check=cid, severity=sev, message=message, count=count, details=details,
                   fails_policy=sev == "error")


def unusable(fs: FileScan) -> bool:
    """Whether a scanned file is one no trainer can load either: not a torch.save file at all (cut
    before its zip directory, random bytes, not a regular file), an unreadable zip or a malformed
    pickle. A file refused for safety or size only is not (the trainer would load it)."""
    return fs.kind == "other" or bool(fs.error and fs.error.startswith(("malformed pickle", "unreadable zip")))


class _Reader:
    """Scans and loads the files of one checkpoint, recording every scan and unsafe pickle."""

    def __init__(self, info: CheckpointInfo):
        self.info = info
        #: whether the last :meth:`load` loaded its file (a file holding None loads as None too)
        self.loaded = False

    def rel(self, p: Path) -> str:
        try:
            return str(p.relative_to(self.info.root)) if p != self.info.root else p.name
        except ValueError:
            return str(p)

    def load(self, p: Path) -> Any:
        """The loaded object of ``p``, or None when it must not (or could not) be loaded."""
        fs = scan_file(p)
        rel = self.rel(p)
        self.info.files[rel] = fs
        self.loaded = False
        if fs.unsafe:
            shown = ", ".join(fs.unsafe[:8]) + (f" and {len(fs.unsafe) - 8} more" if len(fs.unsafe) > 8 else "")
            self.info.findings.append(_finding(
                "ckpt.unsafe_pickle", f"{rel} needs {len(fs.unsafe)} global(s) beyond tensors and plain containers "
                f"({shown}): not loaded, since unpickling it would import and call them; what it holds is judged "
                "from its name", count=len(fs.unsafe), file=rel, globals=fs.unsafe))
            return None
        try:
            obj = load_safe(fs)
            self.loaded = True
            return obj
        except UnsafeCheckpoint as e:
            self.info.notes.append(f"{rel}: not loaded ({e})")
            if unusable(fs):
                self.info.unusable[rel] = fs.error or ("not a torch.save file: neither a zip archive holding "
                                                       "data.pkl nor a pickle (cut before its zip directory, or "
                                                       "other bytes)")
            return None


# ---------------------------------------------------------------------------------------------- shapes


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") and hasattr(v, "numel")


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if _is_tensor(v) and v.numel() == 1:
        return v.item()
    return None


def hollow(v: Any) -> str | None:
    """What makes a piece's value hold nothing a resume can restore (``None``, an empty dict, list,
    string or tensor), or None when it holds something."""
    if v is None:
        return "None"
    if isinstance(v, (dict, list, tuple, set, str, bytes)) and not v:
        return f"an empty {type(v).__name__}"
    if _is_tensor(v) and v.numel() == 0:
        return "an empty tensor"
    return None


def is_optimizer_state(d: Any) -> bool:
    return isinstance(d, dict) and "state" in d and "param_groups" in d


def is_scheduler_state(d: Any) -> bool:
    return isinstance(d, dict) and ("last_epoch" in d or "last_batch_iteration" in d) and not is_optimizer_state(d)


def is_scaler_state(d: Any) -> bool:
    return isinstance(d, dict) and (("scale" in d and "growth_factor" in d) or "cur_scale" in d)


def optimizer_detail(osd: dict) -> dict[str, Any]:
    """Per parameter group: params, params with state, the moment buffers held (``exp_avg``, ...);
    the optimizer's step count (the largest ``step`` of any param's state)."""
    state = osd.get("state") or {}
    groups = []
    steps: set[float] = set()
    for gi, g in enumerate(osd.get("param_groups") or []):
        params = list(g.get("params") or [])
        with_state = [p for p in params if isinstance(state.get(p), dict)]
        bufs: set[str] = set()
        for p in with_state:
            for k, v in state[p].items():
                if k == "step":
                    s = _num(v)
                    if s is not None:
                        steps.add(s)
                elif _is_tensor(v):
                    bufs.add(k)
        no_moments = "momentum" in g and "betas" not in g and not g.get("momentum")  # plain SGD keeps none
        groups.append({"group": gi, "params": len(params), "with_state": len(with_state), "buffers": sorted(bufs),
                       "lr": _num(g.get("lr")), "initial_lr": _num(g.get("initial_lr")),
                       "expects_buffers": not no_moments})
    return {"groups": groups, "step": int(max(steps)) if steps else None,
            "scheduler_attached": any(g["initial_lr"] is not None for g in groups)}


def _bare_groups(det: dict[str, Any]) -> list[dict[str, Any]]:
    """The param groups of :func:`optimizer_detail` whose optimizer keeps moment buffers, when the
    optimizer holds none for any param (no state, or states of no tensor): a hollow optimizer state.
    Some params without state are no defect: a param that never got a gradient (frozen with
    ``requires_grad=False`` yet handed to the optimizer, an unused head, a LoRA base weight) has none
    in the run that saved it either (``torch.optim.AdamW`` skips params whose ``grad`` is None), so
    the resume restores exactly what the run held; [] then."""
    expecting = [g for g in det["groups"] if g["expects_buffers"] and g["params"]]
    if any(g["with_state"] and g["buffers"] for g in expecting):
        return []
    return expecting


def _judge_optimizer(info: CheckpointInfo, osd: dict | None, where: str) -> None:
    """An optimizer state dict: present, its step, and ``ckpt.missing_optimizer`` when a group lacks
    moment buffers past step 0 (an optimizer that never stepped holds an empty ``state``). Judged when
    a step count above 0 is already read; otherwise once every step is (:func:`_judge_bare_optimizers`)."""
    pc = info.pieces["optimizer"]
    if osd is None:
        return
    det = optimizer_detail(osd)
    pc.present = True
    pc.detail = det
    if det["step"] is not None:
        info.steps["optimizer.step"] = det["step"]
    if _bare_groups(det):
        info.bare_optimizers.append((where, det))
        if any(v > 0 for v in info.steps.values()):
            _judge_bare_optimizers(info)


def _judge_bare_optimizers(info: CheckpointInfo) -> None:
    """``ckpt.missing_optimizer`` for each optimizer state of :attr:`CheckpointInfo.bare_optimizers`
    once a step count above 0 is read (the folder's, ``global_step``, the scheduler's ``last_epoch``,
    a ``step`` key): past step 0 every param an Adam or momentum optimizer updated holds its moments,
    so an optimizer holding them for no param (:func:`_bare_groups`) restarts every moment from zero."""
    past = {k: v for k, v in info.steps.items() if v > 0}
    if not past:
        return
    shown = ", ".join(f"{k} {v}" for k, v in past.items())
    for where, det in info.bare_optimizers:
        bare = _bare_groups(det)
        info.pieces["optimizer"].present = False
        desc = "; ".join(f"group {g['group']}: {g['params'] - g['with_state']} of {g['params']} params without "
                         "state" if g["with_state"] < g["params"] else f"group {g['group']}: its "
                         f"{g['params']} params' state holds no tensor" for g in bare)
        if not any(g["with_state"] for g in det["groups"]):
            desc = "its state is empty: " + desc
        info.findings.append(_finding(
            "ckpt.missing_optimizer", f"{where}: the optimizer state holds no moment buffers ({desc}) while the "
            f"checkpoint is past step 0 ({shown}): those params restart from zero moments, a warm start rather "
            "than a lossless resume", count=len(bare), groups=[g["group"] for g in bare], file=where))
    info.bare_optimizers.clear()


def _rng_kinds(d: Any) -> list[str]:
    """The generators an RNG state dict holds (Hugging Face's and accelerate's key names); a key
    whose value is :func:`hollow` (None, empty) holds none."""
    if not isinstance(d, dict):
        return []
    names = {"python": ("python", "random_state", "py_rng", "python_rng"),
             "numpy": ("numpy", "numpy_random_seed", "np_rng", "numpy_rng"),
             "torch": ("cpu", "torch", "torch_manual_seed", "torch_rng", "cpu_rng_state"),
             "cuda": ("cuda", "torch_cuda_manual_seed", "cuda_rng", "cuda_rng_state")}
    return [k for k, keys in names.items() if any(x in d and hollow(d[x]) is None for x in keys)]


def _holds(v: Any) -> str:
    """What ``v`` is, for a finding about a piece that holds nothing usable ("None", "an empty dict",
    "a dict of keys a, b")."""
    h = hollow(v)
    if h:
        return h
    if isinstance(v, dict):
        return f"a dict of keys {', '.join(map(str, list(v)[:6]))}" + (" ..." if len(v) > 6 else "")
    return f"a {type(v).__name__}"


def is_scaler_hollow(d: Any) -> str | None:
    """Why a loaded loss scaler state holds no loss scale (``scale`` / DeepSpeed's ``cur_scale`` a
    positive number), or None. torch's ``GradScaler.state_dict()`` is ``{}`` when the scaler is
    disabled (bf16 or fp32 runs)."""
    if not is_scaler_state(d):
        return _holds(d)
    sc = _num(d.get("scale", d.get("cur_scale")))
    if sc is None or not sc > 0:
        return f"a scale of {d.get('scale', d.get('cur_scale'))!r}"
    return None


def _hollow_piece(info: CheckpointInfo, name: str, file: str, what: str) -> None:
    """A piece whose file or key is there and holds nothing a resume can restore (``what``: what it
    holds): not present, its missing-piece finding says so (the scaler's only under fp16, by
    :func:`_judge_scaler`)."""
    pc = info.pieces[name]
    pc.present = False
    pc.detail["hollow"] = f"{file} holds {what}"
    if name in _MISSING_ID:
        cid, msg = _MISSING_ID[name]
        _missing(info, cid, f"{file} holds {what}, so the checkpoint has " + msg, file=file)


def _judge_rng(info: CheckpointInfo, per_rank: dict[int, list[str] | None], files: dict[int, str],
               never: str | None = None, empty: dict[int, str] | None = None) -> None:
    """Per rank: the generators found (None: the file was not loaded; an empty list: loaded, and it
    holds none, ``empty`` saying what it holds instead). ``never``: the layout saves no RNG of its
    own (the reason, for the finding)."""
    empty = empty or {}
    pc = info.pieces["rng"]
    pc.files = [files[r] for r in sorted(files)]
    pc.detail = {"ranks": {str(r): v for r, v in sorted(per_rank.items())}}
    if not per_rank:
        info.findings.append(_finding(
            "ckpt.missing_rng", "no RNG state (python, numpy, torch, CUDA) for any rank"
            + (f" ({never})" if never else "") + ": dropout masks, random augmentation and sampling after the "
            "resume differ from an uninterrupted run", ranks=list(range(info.world_size or 1))))
        return
    pc.present = True
    for r, kinds in sorted(per_rank.items()):
        if kinds is None:
            continue
        lack = [k for k in ("python", "numpy", "torch") if k not in kinds]
        if lack:
            pc.present = False
            what = (f"lacks the {', '.join(lack)} generator(s)" if kinds else
                    f"holds none of the generators ({', '.join(lack)}: {empty.get(r, 'no key naming one')})")
            info.findings.append(_finding(
                "ckpt.missing_rng", f"rank {r}'s RNG state ({files.get(r)}) {what}: "
                "their draws after the resume differ from an uninterrupted run", rank=r, generators=lack))
    if info.world_size:
        gone = [r for r in range(info.world_size) if r not in per_rank]
        if gone:
            info.findings.append(_finding(
                "ckpt.rank_missing", f"no RNG state file for rank(s) {gone} of {info.world_size}: those ranks restart "
                "their RNG from the seed, so their dropout and sampling differ from the others' resumed state",
                count=len(gone), ranks=gone, kind="rng"))


def _rng_read(rd: _Reader, p: Path) -> tuple[list[str] | None, str]:
    """The generators of a per-rank RNG file (None: not loaded), and what the file holds when it
    names none (for the finding)."""
    d = rd.load(p)
    if not rd.loaded:
        return None, ""
    kinds = _rng_kinds(d)
    return kinds, "" if kinds else (f"it holds {hollow(d)}" if hollow(d) else f"it holds a {type(d).__name__}"
                                    + (f" of keys {', '.join(map(str, list(d)[:6]))}" if isinstance(d, dict) else ""))


def _judge_steps(info: CheckpointInfo, scale: dict[str, int] | None = None) -> None:
    """``ckpt.step_mismatch`` when the step counts read disagree (``scale``: a source counted in
    units of another, e.g. accelerate's scheduler stepping once per process)."""
    vals = {k: v // (scale or {}).get(k, 1) if v % (scale or {}).get(k, 1) == 0 else v
            for k, v in info.steps.items()}
    if len(set(vals.values())) > 1:
        shown = ", ".join(f"{k} {v}" for k, v in info.steps.items())
        info.findings.append(_finding(
            "ckpt.step_mismatch", f"the step counts disagree ({shown}): the resumed run continues the schedule, "
            "the optimizer's bias correction and the data position from different steps (a file from another save, "
            "or optimizer steps skipped by the loss scaler)", steps=dict(info.steps)))
    info.pieces["step"].present = bool(info.steps)
    info.pieces["step"].detail = dict(info.steps)


def _missing(info: CheckpointInfo, cid: str, message: str, **details: Any) -> None:
    info.findings.append(_finding(cid, message, **details))


MSG_OPTIMIZER = ("no optimizer state: the optimizer restarts from zero moments, a warm start from the weights and not "
                 "a lossless resume (Adam's first updates after it are full size)")
MSG_SCHEDULER = ("no learning-rate scheduler state: the scheduler restarts at step 0, so the warmup reruns and the "
                 "learning rate jumps at the resume point")
MSG_SCALER = (f"fp16 training with a loss scaler, and no scaler state: the loss scale restarts at its initial value "
              f"({GRADSCALER_INIT_SCALE:g} for torch's GradScaler), so the first steps after the resume overflow "
              "and are skipped until it backs off")
MSG_SAMPLER = ("no sampler or dataloader position: the data order restarts at the epoch's first batch, so the "
               "batches before the save are trained on again and as many at the epoch's end are never seen")


def _judge_scaler(info: CheckpointInfo, fp16: bool | None) -> None:
    if info.pieces["scaler"].present:
        return
    if fp16:
        why = info.pieces["scaler"].detail.get("hollow")
        _missing(info, "ckpt.missing_scaler", f"{why}, not a loss scale: {MSG_SCALER}" if why else MSG_SCALER)
    elif fp16 is None:
        info.pieces["scaler"].note = "pass --fp16 when the run trained in fp16 with a loss scaler"


# ---------------------------------------------------------------------------------------------- layouts


def detect_layout(path: Path) -> tuple[str, Path]:
    """The layout of ``path`` and the checkpoint to judge (see the module docstring).

    Raises:
        UsageError: no layout recognised (the message lists what each layout needs).
    """
    if path.is_file():
        if path.name == ".metadata":
            return "dcp", path.parent
        return ("lightning" if path.suffix == ".ckpt" else "torch_save"), path
    if not path.is_dir():
        link = dangling_link(path)
        raise UsageError(f"{path}: no such file or folder" if link is None else f"{path}: {link}")
    names = {p.name for p in path.iterdir()}
    if ".metadata" in names:
        return "dcp", path
    ckpts = sorted((int(m.group(1)), path / n) for n in names if (m := _CKPT_DIR.match(n)) and (path / n).is_dir())
    resume_state = any(_HF_RNG.match(n) for n in names) or {"optimizer.pt", "scheduler.pt"} & names
    if ckpts and not resume_state:
        # a Trainer's output folder: its own trainer_state.json (Trainer.save_state, DatacheckCallback at
        # the end) and final weights are no resume point; resume_from_checkpoint=True takes the last checkpoint-N
        return detect_layout(ckpts[-1][1])
    if "trainer_state.json" in names or resume_state:
        return "hf_trainer", path  # (under DeepSpeed it also holds latest and global_stepN/)
    if "latest" in names or any(_DS_TAG.match(n) for n in names):
        return "deepspeed", path
    if any(_DS_MODEL.match(n) or _DS_OPTIM.match(n) for n in names):
        return "deepspeed", path
    if any(_ACC_RNG.match(n) for n in names) or any(n.startswith(("optimizer", "scheduler")) and n.endswith(".bin")
                                                    for n in names):
        return "accelerate", path
    if _CKPT_DIR.match(path.name) and names & {"model.safetensors", "pytorch_model.bin", "model.safetensors.index.json"}:
        return "hf_trainer", path
    ckpt_files = sorted(n for n in names if n.endswith(".ckpt"))
    if len(ckpt_files) == 1:
        return "lightning", path / ckpt_files[0]
    raise UsageError(
        f"{path}: not a checkpoint datacheck recognises: a Hugging Face checkpoint-N/ folder (trainer_state.json, "
        "optimizer.pt, rng_state*.pth), an accelerate save_state folder (random_states_<r>.pkl, optimizer.bin), "
        "a DeepSpeed folder (latest, global_stepN/), a torch.distributed.checkpoint folder (.metadata), a "
        "Lightning .ckpt or a torch.save file")


def _weights_files(info: CheckpointInfo, rd: _Reader, folder: Path) -> None:
    pc = info.pieces["weights"]
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    counted: set[str] = set()  # the weights files whose tensors were counted
    for idx in [n for n in names if n.endswith(".index.json")]:
        try:
            wm = read_json_file(folder / idx).get("weight_map") or {}
        except (OSError, ValueError, AttributeError) as e:
            info.notes.append(f"{idx}: unreadable ({e})")
            continue
        shards = sorted(set(wm.values()))
        gone = [s for s in shards if not (folder / s).is_file()]
        pc.files.append(idx)
        pc.present = bool(shards) and not gone
        pc.detail["shards"] = len(shards)
        if not shards:
            pc.note = f"{idx}: its weight_map names no shard: no weights to restore"
        if gone:
            _missing(info, "ckpt.rank_missing", f"the weights index {idx} names {len(shards)} shard(s) and "
                     f"{len(gone)} are absent ({', '.join(gone[:5])}): the model cannot be restored",
                     count=len(gone), files=gone, kind="model_shard")
        return
    for n in names:
        if n.endswith(".safetensors") and (n.startswith(("model", "adapter_model", "pytorch_model"))):
            try:
                head = safetensors_header(folder / n)
                pc.detail.setdefault("tensors", 0)
                pc.detail["tensors"] += sum(1 for k in head if k != "__metadata__")
            except (OSError, ValueError) as e:
                info.notes.append(f"{n}: safetensors header unreadable ({e})")
                continue
            pc.present = True
            pc.files.append(n)
            counted.add(n)
        elif re.match(r"^(pytorch_model|adapter_model)(_fsdp)?(_\d+)?\.bin$", n) or (
                n.startswith("pytorch_model-") and n.endswith(".bin")):
            fs = scan_file(folder / n)
            info.files[n] = fs
            if unusable(fs):
                info.notes.append(f"{n}: not loadable ({fs.error or 'not a torch.save file'})")
                continue
            pc.present = True
            pc.files.append(n)
            if fs.unsafe:
                rd.load(folder / n)  # records the unsafe_pickle finding
            elif fs.kind == "torch_zip":  # a tensor's storage is a data/<key> member (tied tensors share one)
                pc.detail["tensors"] = pc.detail.get("tensors", 0) + sum(m.startswith("data/") for m in fs.members)
                counted.add(n)
    if pc.present and pc.detail.get("tensors") == 0 and counted >= set(pc.files):
        pc.present = False
        pc.note = f"{', '.join(pc.files)}: no tensor in it: no weights to restore"


def _read_scaler(info: CheckpointInfo, rd: _Reader, root: Path, name: str) -> None:
    """A loss scaler file: present, unless it loads and holds no loss scale (:func:`is_scaler_hollow`)."""
    pc = info.pieces["scaler"]
    pc.present, pc.files = True, [name]
    d = rd.load(root / name)
    why = is_scaler_hollow(d) if rd.loaded else None
    if why:
        pc.present = False
        pc.detail["hollow"] = f"{name} holds {why}"


def _inspect_hf(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    root = info.root
    if (m := _CKPT_DIR.match(root.name)):
        info.steps["folder"] = int(m.group(1))
    names = {p.name for p in root.iterdir()}
    _weights_files(info, rd, root)
    ts_present = "trainer_state.json" in names
    if ts_present:
        try:
            ts = read_json_file(root / "trainer_state.json")
            gs = ts.get("global_step") if isinstance(ts, dict) else None
            if not isinstance(ts, dict) or not isinstance(gs, int) or isinstance(gs, bool) or gs < 0:
                what = (f"a JSON {type(ts).__name__}, not an object" if not isinstance(ts, dict) else
                        f"its global_step is {str(gs)[:40]!r}, not a step count")
                raise ValueError(f"{what}: the Trainer cannot read its data position from it")
            info.steps["trainer_state.global_step"] = gs
            info.pieces["sampler"].present = True
            info.pieces["sampler"].files = ["trainer_state.json"]
            info.pieces["sampler"].note = ("the Trainer rebuilds the data position from global_step and the seed "
                                           "(it skips the epoch's first global_step batches)")
            info.pieces["sampler"].detail = {"epoch": ts.get("epoch"), "global_step": gs,
                                             "train_batch_size": ts.get("train_batch_size")}
        except (OSError, ValueError) as e:  # NotRegular (a FIFO, a folder) is an OSError: never opened
            info.notes.append(f"trainer_state.json: unreadable ({e})")
            ts_present = False
    if not ts_present:
        _missing(info, "ckpt.missing_sampler_state", "no trainer_state.json: the Trainer cannot rebuild the data "
                 "position (it resumes at global_step 0 and skips no batch), so the data order restarts at the "
                 "first batch and the batches before the save are trained on again")
    ds_here = "latest" in names or any(_DS_TAG.match(n) and (root / n).is_dir() for n in names)
    if ds_here:  # the Trainer under DeepSpeed: the engine saves the optimizer (and its scheduler) itself
        _merge_deepspeed(info, root, fp16)
    opt_files = sorted(n for n in names if n == "optimizer.pt" or n.endswith("-optimizer.pt"))
    if ds_here:
        pass
    elif opt_files:
        info.pieces["optimizer"].files = opt_files
        osd = rd.load(root / opt_files[0])
        if is_optimizer_state(osd):
            _judge_optimizer(info, osd, opt_files[0])
        elif rd.loaded and hollow(osd):
            _hollow_piece(info, "optimizer", opt_files[0], f"{hollow(osd)}, not an optimizer state dict")
        else:
            info.pieces["optimizer"].present = True
            info.pieces["optimizer"].note = f"{opt_files[0]} present, not loaded"
    else:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER)
    if ds_here and info.pieces["scheduler"].present:
        pass
    elif "scheduler.pt" in names:
        pc = info.pieces["scheduler"]
        pc.present, pc.files = True, ["scheduler.pt"]
        ssd = rd.load(root / "scheduler.pt")
        if is_scheduler_state(ssd):
            pc.detail = {"last_epoch": ssd.get("last_epoch"), "step_count": ssd.get("_step_count")}
            if isinstance(ssd.get("last_epoch"), int):
                info.steps["scheduler.last_epoch"] = ssd["last_epoch"]
        elif rd.loaded and hollow(ssd):  # (a custom scheduler's state may hold no last_epoch: not judged)
            _hollow_piece(info, "scheduler", "scheduler.pt", f"{hollow(ssd)}, not a scheduler state")
    else:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER)
    if "scaler.pt" in names:
        _read_scaler(info, rd, root, "scaler.pt")
    if not ds_here:  # under DeepSpeed the engine's own loss scaler was judged with its optimizer
        _judge_scaler(info, fp16)
    rng = {int(m.group(1) or 0): n for n in names if (m := _HF_RNG.match(n))}
    if info.world_size is None and rng:
        info.world_size = max(rng) + 1
    info.ranks = sorted(rng)
    read = {r: _rng_read(rd, root / n) for r, n in sorted(rng.items())}
    _judge_rng(info, {r: k for r, (k, _) in read.items()}, rng, empty={r: e for r, (_, e) in read.items()})
    _judge_steps(info)


#: what a DeepSpeed engine's folder inside a Trainer checkpoint decides (the Trainer saves RNG and the
#: data position itself)
_DS_MERGED = ("ckpt.missing_optimizer", "ckpt.missing_scheduler", "ckpt.missing_scaler", "ckpt.rank_missing",
              "ckpt.unsafe_pickle")


def _merge_deepspeed(info: CheckpointInfo, root: Path, fp16: bool | None) -> None:
    """A Trainer checkpoint saved under DeepSpeed (``checkpoint-N/`` holding ``latest`` and
    ``global_stepN/``): the optimizer, scheduler (when DeepSpeed owns it), loss scaler and their per-rank
    files come from the engine's folder, judged as a DeepSpeed checkpoint."""
    sub = CheckpointInfo(path=root, root=root, layout="deepspeed", world_size=info.world_size)
    try:
        _inspect_deepspeed(sub, _Reader(sub), fp16)
        _judge_bare_optimizers(sub)
    except UsageError as e:
        info.notes.append(f"DeepSpeed folder inside the checkpoint not read: {e}")
        return
    tag = sub.root.name
    for p in ("optimizer", "scheduler", "scaler"):
        pc = sub.pieces[p]
        if pc.present:
            pc.files = [f"{tag}/{f}" for f in pc.files]
            info.pieces[p] = pc
    info.files.update({f"{tag}/{k}": v for k, v in sub.files.items()})
    scheduler_pt = (root / "scheduler.pt").is_file()
    info.findings.extend(f for f in sub.findings if f.check in _DS_MERGED
                         and not (f.check == "ckpt.missing_scheduler" and scheduler_pt))
    info.steps.update({f"deepspeed.{k}": v for k, v in sub.steps.items() if k != "folder"})
    info.notes.extend(f"{tag}: {n}" for n in sub.notes)


def _inspect_accelerate(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    root = info.root
    names = sorted(p.name for p in root.iterdir())
    _weights_files(info, rd, root)
    opts = [n for n in names if re.match(r"^optimizer(_\d+)?\.bin$", n)]
    if opts:
        info.pieces["optimizer"].files = opts
        osd = rd.load(root / opts[0])
        if is_optimizer_state(osd):
            _judge_optimizer(info, osd, opts[0])
        elif rd.loaded and hollow(osd):
            _hollow_piece(info, "optimizer", opts[0], f"{hollow(osd)}, not an optimizer state dict")
        else:
            info.pieces["optimizer"].present = True
    else:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER)
    scheds = [n for n in names if re.match(r"^scheduler(_\d+)?\.bin$", n)]
    if scheds:
        pc = info.pieces["scheduler"]
        pc.present, pc.files = True, scheds
        ssd = rd.load(root / scheds[0])
        if is_scheduler_state(ssd) and isinstance(ssd.get("last_epoch"), int):
            pc.detail = {"last_epoch": ssd["last_epoch"]}
            info.steps["scheduler.last_epoch"] = ssd["last_epoch"]
        elif rd.loaded and hollow(ssd):
            _hollow_piece(info, "scheduler", scheds[0], f"{hollow(ssd)}, not a scheduler state")
    else:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER)
    if "scaler.pt" in names:
        _read_scaler(info, rd, root, "scaler.pt")
    _judge_scaler(info, fp16)
    samplers = [n for n in names if re.match(r"^(sampler|dl_state_dict)(_\d+)?\.bin$", n)]
    if samplers:
        info.pieces["sampler"].present, info.pieces["sampler"].files = True, samplers
        empty = {}
        for n in samplers:
            d = rd.load(root / n)
            if rd.loaded and hollow(d):
                empty[n] = hollow(d)
        if len(empty) == len(samplers):
            _hollow_piece(info, "sampler", ", ".join(samplers), " and ".join(sorted(set(empty.values()))))
    else:
        _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER + " (accelerate restores no data position: "
                 "the loop must call skip_first_batches itself, or use a stateful dataloader)")
    rng = {int(m.group(1)): n for n in names if (m := _ACC_RNG.match(n))}
    if info.world_size is None and rng:
        info.world_size = max(rng) + 1
    info.ranks = sorted(rng)
    kinds: dict[int, list[str] | None] = {}
    empty: dict[int, str] = {}
    for r, n in sorted(rng.items()):
        kinds[r], empty[r] = _rng_read(rd, root / n)
    _judge_rng(info, kinds, rng, empty=empty)
    scale = {"scheduler.last_epoch": info.world_size or 1}  # AcceleratedScheduler steps once per process
    _judge_steps(info, scale)


def _inspect_lightning(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    ck = rd.load(info.root)
    rel = rd.rel(info.root)
    if not isinstance(ck, dict):
        info.notes.append(f"{rel}: not loaded; its pieces cannot be judged")
        return
    for p in ("weights", "optimizer", "scheduler", "scaler", "sampler"):
        info.pieces[p].files = [rel]
    if isinstance(ck.get("global_step"), int):
        info.steps["global_step"] = ck["global_step"]
    sd = ck.get("state_dict")
    info.pieces["weights"].present = isinstance(sd, dict) and bool(sd)
    info.pieces["weights"].detail = {"tensors": len(sd) if isinstance(sd, dict) else 0}
    opts = ck.get("optimizer_states") or []
    attached = False
    if opts and all(is_optimizer_state(o) for o in opts):
        for o in opts:
            _judge_optimizer(info, o, f"{rel} optimizer_states")
            attached = attached or optimizer_detail(o)["scheduler_attached"]
    else:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER + " (optimizer_states is empty: saved with "
                 "save_weights_only)")
    scheds = ck.get("lr_schedulers") or []
    bad = [i for i, s in enumerate(scheds) if hollow(s)]  # (a custom scheduler's state may hold no last_epoch)
    if scheds and not bad:
        info.pieces["scheduler"].present = True
        info.pieces["scheduler"].detail = {"last_epoch": [s.get("last_epoch") for s in scheds if isinstance(s, dict)]}
    elif scheds:
        _hollow_piece(info, "scheduler", f"{rel} lr_schedulers", ", ".join(
            f"[{i}] {hollow(scheds[i])}" for i in bad) + ", not a scheduler state")
    elif attached or not opts:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER + (" (the optimizer's param groups carry initial_lr: "
                 "a scheduler was attached)" if attached else ""))
    for key in ("MixedPrecision", "native_amp_scaling_state"):
        if key in ck:  # Lightning writes the key only when its scaler's state is not empty
            why = is_scaler_hollow(ck[key])
            info.pieces["scaler"].present = not why
            if why:
                info.pieces["scaler"].detail["hollow"] = f"{rel} {key} holds {why}"
            break
    _judge_scaler(info, fp16)
    loops = ck.get("loops")
    fit = loops.get("fit_loop") if isinstance(loops, dict) else None
    if not isinstance(fit, dict):
        _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER + " (no loops state)")
    else:
        bp = fit.get("epoch_loop.batch_progress") or {}
        # "processed": batches whose training step ran (a checkpoint saved in on_train_batch_end is written
        # before Lightning counts that batch "completed")
        cur_p = bp.get("current") or {}
        cur = cur_p.get("processed", cur_p.get("completed"))
        ep = ((fit.get("epoch_progress") or {}).get("current") or {}).get("completed")
        stateful = bool((fit.get("state_dict") or {}).get("combined_loader"))
        info.pieces["sampler"].detail = {"epoch": ep, "batches_done_in_epoch": cur, "stateful_dataloader": stateful,
                                         "is_last_batch": bp.get("is_last_batch")}
        mid = isinstance(cur, int) and cur > 0 and not bp.get("is_last_batch")
        if mid and not stateful:
            _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER + f" (saved {cur} batches into epoch {ep}; "
                     "Lightning restores the loop counters but restarts a dataloader that is not stateful at the "
                     "epoch's first batch)", batches_done=cur, epoch=ep)
        else:
            info.pieces["sampler"].present = True
    info.ranks = [0]
    _judge_rng(info, {}, {}, never="Lightning saves no RNG state in its checkpoint")
    _judge_steps(info)


def _inspect_deepspeed(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    root = info.root
    latest = root / "latest"
    if latest.is_file():
        tag = latest.read_text(errors="replace").strip()[:200]
        if not (root / tag).is_dir():
            raise UsageError(f"{latest} names {tag!r}, which is not a folder of {root}")
        info.root = root = root / tag
    elif not (any(_DS_MODEL.match(p.name) for p in root.iterdir())):
        tags = sorted((int(m.group(1)), p) for p in root.iterdir() if (m := _DS_TAG.match(p.name)))
        if not tags:
            raise UsageError(f"{root}: no DeepSpeed model states file (mp_rank_XX_model_states.pt)")
        info.notes.append(f"no 'latest' file: judged the highest tag, {tags[-1][1].name}")
        info.root = root = tags[-1][1]
    if (m := _DS_TAG.match(root.name)):
        info.steps["folder"] = int(m.group(1))
    names = sorted(p.name for p in root.iterdir())
    models = {int(m.group(1)): n for n in names if (m := _DS_MODEL.match(n))}
    optims = {(int(m.group(1)), int(m.group(2))): n for n in names if (m := _DS_OPTIM.match(n))}
    if not models:
        raise UsageError(f"{root}: no DeepSpeed model states file (mp_rank_XX_model_states.pt)")
    ms = rd.load(root / models[min(models)])
    fs0 = info.files[models[min(models)]]
    info.pieces["weights"].files = [models[r] for r in sorted(models)]
    dp = mp = None
    if isinstance(ms, dict):
        dp, mp = ms.get("dp_world_size"), ms.get("mp_world_size")
        mod = ms.get("module")
        info.pieces["weights"].present = isinstance(mod, dict) and bool(mod) or bool(optims)
        if isinstance(ms.get("global_steps"), int):
            info.steps["global_steps"] = ms["global_steps"]
        lrs = ms.get("lr_scheduler")
        if isinstance(lrs, dict) and hollow(lrs):
            info.pieces["scheduler"].files = [models[min(models)]]
            _hollow_piece(info, "scheduler", f"{models[min(models)]} lr_scheduler",
                          f"{hollow(lrs)}, not a scheduler state")
        elif isinstance(lrs, dict):
            info.pieces["scheduler"].present = True
            info.pieces["scheduler"].files = [models[min(models)]]
            it = lrs.get("last_batch_iteration", lrs.get("last_epoch"))
            info.pieces["scheduler"].detail = {"last_batch_iteration": it}
            if isinstance(it, int):
                info.steps["lr_scheduler"] = it + 1 if "last_batch_iteration" in lrs else it
        cfg = ms.get("ds_config") if isinstance(ms.get("ds_config"), dict) else {}
        if fp16 is None and isinstance(cfg.get("fp16"), dict):
            fp16 = bool(cfg["fp16"].get("enabled"))
        if isinstance(ms.get("optimizer"), dict):
            osd = ms["optimizer"]
            inner = osd.get("optimizer_state_dict", osd) if isinstance(osd, dict) else None
            _judge_optimizer(info, inner if is_optimizer_state(inner) else None, models[min(models)])
        sampler = any(not hollow(v) for k, v in ms.items() if "sampler" in str(k) or "dataloader" in str(k))
        info.pieces["sampler"].present = bool(sampler)
        rng_keys = [k for k, v in ms.items() if ("rng" in str(k).lower() or "random" in str(k).lower())
                    and not hollow(v)]
        if rng_keys:
            info.pieces["rng"].detail = {"client_state_keys": rng_keys}
    else:
        info.pieces["weights"].present = True
        info.pieces["weights"].note = "model states file not loaded"
        keys = set(fs0.strings)
        info.pieces["sampler"].present = any("sampler" in k or "dataloader" in k for k in keys)
    if optims:
        ranks = sorted({d for d, _ in optims})
        info.ranks = ranks
        info.world_size = info.world_size or (dp if isinstance(dp, int) else max(ranks) + 1)
        info.pieces["optimizer"].files = [optims[k] for k in sorted(optims)]
        first = optims[min(optims)]
        osd = rd.load(root / first)
        scan = info.files[first]
        inner = osd.get("optimizer_state_dict") if isinstance(osd, dict) else None
        if isinstance(inner, dict):
            base = inner.get("base_optimizer_state") or inner.get("optimizer_state_dict")
            states = base if isinstance(base, list) else [base]
            bufs = sorted({k for st in states if isinstance(st, dict) for per in (st.get("state") or {}).values()
                           if isinstance(per, dict) for k, v in per.items() if k != "step" and _is_tensor(v)}
                          | {k for st in states if isinstance(st, dict) for k, v in st.items()
                             if k != "step" and _is_tensor(v)})
            info.pieces["optimizer"].present = bool(bufs)
            info.pieces["optimizer"].detail = {"zero_stage": inner.get("zero_stage"), "buffers": bufs,
                                               "partition_count": inner.get("partition_count")}
            if not bufs:
                _missing(info, "ckpt.missing_optimizer", f"{first}: the ZeRO optimizer state holds no moment "
                         "buffers: a warm start, not a lossless resume", file=first)
            scaler = inner.get("loss_scaler") is not None or bool(inner.get("dynamic_loss_scale"))
        else:
            info.pieces["optimizer"].present = True
            info.pieces["optimizer"].note = f"{first} not loaded: judged from its pickle's names"
            scaler = "loss_scaler" in scan.strings or "dynamic_loss_scale" in scan.strings
        info.pieces["scaler"].present = scaler and bool(fp16)
        mps = sorted({m for _, m in optims})
        gone = [f"zero_pp_rank_{d}_mp_rank_{m:02d}" for d in range(info.world_size or 0) for m in mps
                if (d, m) not in optims]
        if gone:
            _missing(info, "ckpt.rank_missing", f"no ZeRO optimizer shard for {len(gone)} data-parallel rank(s) "
                     f"of {info.world_size} ({', '.join(gone[:5])}): those ranks cannot restore their partition of "
                     "the optimizer state", count=len(gone), files=gone, kind="optimizer_shard")
    elif not info.pieces["optimizer"].present:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER)
    if isinstance(mp, int) and mp > 1:
        gone_m = [r for r in range(mp) if r not in models]
        if gone_m:
            _missing(info, "ckpt.rank_missing", f"no model states file for model-parallel rank(s) {gone_m} of {mp}",
                     count=len(gone_m), ranks=gone_m, kind="model_shard")
    if not info.pieces["scheduler"].present and "hollow" not in info.pieces["scheduler"].detail:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER)
    _judge_scaler(info, fp16)
    if not info.pieces["sampler"].present:
        _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER + " (DeepSpeed saves no data position unless "
                 "its own data sampler is used or the client state holds one)")
    if not info.pieces["rng"].detail:
        _judge_rng(info, {}, {}, never="DeepSpeed saves no RNG state unless the client state holds one")
    else:
        info.pieces["rng"].present = True
    _judge_steps(info)


def _inspect_dcp(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    root = info.root
    try:
        meta, fs = load_dcp_metadata(root / ".metadata")
        info.files[".metadata"] = fs
    except UnsafeCheckpoint as e:
        fs = scan_file(root / ".metadata")
        info.files[".metadata"] = fs
        info.findings.append(_finding("ckpt.unsafe_pickle", f".metadata needs globals beyond the metadata classes "
                                      f"of torch.distributed.checkpoint ({e}): not loaded", file=".metadata",
                                      globals=fs.unsafe))
        return
    keys = list(getattr(meta, "state_dict_metadata", {}) or {})
    files = sorted({getattr(v, "relative_path", "") for v in (getattr(meta, "storage_data", None) or {}).values()})
    gone = [f for f in files if f and not (root / f).is_file()]
    ranks = sorted({int(m.group(1)) for f in files if (m := _DCP_FILE.match(f))})
    info.ranks = ranks
    info.world_size = info.world_size or (max(ranks) + 1 if ranks else None)
    if gone:
        _missing(info, "ckpt.rank_missing", f"the metadata names {len(files)} storage file(s) and {len(gone)} are "
                 f"absent ({', '.join(gone[:5])}): the ranks that wrote them cannot restore their shards",
                 count=len(gone), files=gone, kind="dcp_storage")
    low = [k.lower() for k in keys]

    def has(*subs: str) -> list[str]:
        return [k for k, lk in zip(keys, low) if any(s in lk for s in subs)]

    opt_keys = has(".exp_avg", ".momentum_buffer", ".exp_avg_sq", "optim")
    info.pieces["optimizer"].present = any(k.endswith(("exp_avg", "exp_avg_sq", "momentum_buffer")) for k in opt_keys)
    info.pieces["optimizer"].detail = {"keys": len(opt_keys)}
    weights = [k for k in keys if k not in opt_keys and not has()]
    info.pieces["weights"].present = any(k.startswith(("model.", "module.", "state_dict.")) or k.endswith(
        (".weight", ".bias")) for k in weights)
    info.pieces["scheduler"].present = bool(has("last_epoch", "scheduler"))
    info.pieces["scaler"].present = bool(has("scaler", "growth_factor"))
    info.pieces["sampler"].present = bool(has("sampler", "dataloader", "data_loader"))
    rng = has("rng", "random")
    step_keys = [k for k in keys if k.split(".")[-1] in ("step", "global_step", "iteration", "steps")
                 and ".state." not in k]
    info.pieces["step"].present = bool(step_keys)
    info.pieces["step"].detail = {"keys": step_keys}
    for p in ("weights", "optimizer", "scheduler", "scaler", "sampler"):
        info.pieces[p].files = [".metadata"]
    if not info.pieces["optimizer"].present:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER + " (no moment buffer key in the metadata)")
    if not info.pieces["scheduler"].present:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER)
    _judge_scaler(info, fp16)
    if not info.pieces["sampler"].present:
        _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER)
    if rng:
        info.pieces["rng"].present = True
        info.pieces["rng"].detail = {"keys": rng}
    else:
        _judge_rng(info, {}, {})
    info.notes.append("torch.distributed.checkpoint: pieces are judged from the metadata's keys; step values are in "
                      "the storage files and are not read, so ckpt.step_mismatch is not judged")


def _inspect_torch_save(info: CheckpointInfo, rd: _Reader, fp16: bool | None) -> None:
    rel = rd.rel(info.root)
    ck = rd.load(info.root)
    alone = _piece_alone(ck)
    if alone:
        raise UsageError(f"{info.root}: {alone}: one piece of a checkpoint, not a checkpoint; pass the checkpoint "
                         f"(the folder holding it, {info.root.parent}) to judge every piece of the resume")
    if not isinstance(ck, dict):
        if ck is not None:
            info.notes.append(f"{rel}: holds a {type(ck).__name__}, not a dict of pieces")
        return
    found: dict[str, list[tuple[str, Any]]] = {p: [] for p in PIECES}

    def walk(d: dict, where: str, depth: int) -> None:
        for k, v in d.items():
            key = f"{where}{k}"
            lk = str(k).lower()
            if is_optimizer_state(v):
                found["optimizer"].append((key, v))
            elif is_scheduler_state(v):
                found["scheduler"].append((key, v))
            elif is_scaler_state(v):
                found["scaler"].append((key, v))
            elif _rng_kinds(v) or "rng" in lk or "random_state" in lk:
                found["rng"].append((key, v))
            elif any(s in lk for s in ("sampler", "dataloader", "data_loader")):
                found["sampler"].append((key, v))
            elif lk in ("step", "global_step", "iteration", "iter", "global_steps", "num_updates") and \
                    _num(v) is not None:
                found["step"].append((key, v))
            elif isinstance(v, dict) and v and sum(_is_tensor(x) for x in v.values()) >= len(v) / 2:
                found["weights"].append((key, v))
            elif isinstance(v, dict) and depth < 2:
                walk(v, key + ".", depth + 1)
            elif isinstance(v, (list, tuple)) and v and all(is_optimizer_state(x) for x in v):
                found["optimizer"].extend((f"{key}[{i}]", x) for i, x in enumerate(v))
            elif isinstance(v, (list, tuple)) and v and all(is_scheduler_state(x) for x in v):
                found["scheduler"].extend((f"{key}[{i}]", x) for i, x in enumerate(v))

    if sum(_is_tensor(x) for x in ck.values()) >= max(1, len(ck) / 2):
        found["weights"].append(("(top level)", ck))
    else:
        walk(ck, "", 0)
    # a key naming a piece whose value holds nothing (None, {}, []: a sampler or RNG never filled in),
    # or a loss scaler state with no scale, does not count for its piece
    empty = {p: [(k, hollow(v) if p != "scaler" else is_scaler_hollow(v)) for k, v in found[p]]
             for p in ("scaler", "sampler", "rng")}
    for p in empty:
        empty[p] = [(k, h) for k, h in empty[p] if h]
        found[p] = [(k, v) for k, v in found[p] if k not in {e for e, _ in empty[p]}]
    for p in ("weights", "scaler", "sampler"):
        info.pieces[p].present = bool(found[p])
        info.pieces[p].detail = {"keys": [k for k, _ in found[p]]}
    if empty["scaler"] and not found["scaler"]:
        info.pieces["scaler"].detail["hollow"] = "; ".join(f"{rel}[{k}] holds {h}" for k, h in empty["scaler"])
    attached = False
    for key, osd in found["optimizer"]:
        _judge_optimizer(info, osd, f"{rel}[{key}]")
        attached = attached or optimizer_detail(osd)["scheduler_attached"]
    if not found["optimizer"]:
        _missing(info, "ckpt.missing_optimizer", MSG_OPTIMIZER)
    for key, ssd in found["scheduler"]:
        info.pieces["scheduler"].present = True
        info.pieces["scheduler"].detail = {"key": key, "last_epoch": ssd.get("last_epoch")}
        if isinstance(ssd.get("last_epoch"), int):
            info.steps["scheduler.last_epoch"] = ssd["last_epoch"]
    if not found["scheduler"]:
        _missing(info, "ckpt.missing_scheduler", MSG_SCHEDULER
                 + (" (the optimizer's param groups carry initial_lr: a scheduler was attached)" if attached else ""))
    _judge_scaler(info, fp16)
    if empty["sampler"] and not found["sampler"]:
        _hollow_piece(info, "sampler", ", ".join(f"{rel}[{k}]" for k, _ in empty["sampler"]),
                      " and ".join(sorted({h for _, h in empty["sampler"]})))
    elif not found["sampler"]:
        _missing(info, "ckpt.missing_sampler_state", MSG_SAMPLER)
    for key, v in found["step"]:
        info.steps[key] = int(_num(v) or 0)
    kinds = {0: sorted({k for _, v in found["rng"] for k in _rng_kinds(v)})} if found["rng"] else {}
    info.ranks = [0]
    if empty["rng"] and not found["rng"]:
        _hollow_piece(info, "rng", ", ".join(f"{rel}[{k}]" for k, _ in empty["rng"]),
                      " and ".join(sorted({h for _, h in empty["rng"]})))
    elif kinds and not kinds[0] and not any(isinstance(v, dict) for _, v in found["rng"]):
        # an RNG key whose value is not a dict (a bare generator state tensor): present, generators unknown
        info.pieces["rng"].present = True
        info.pieces["rng"].detail = {"keys": [k for k, _ in found["rng"]]}
    elif kinds and not kinds[0]:  # a dict under an RNG key naming no generator
        _judge_rng(info, kinds, {0: rel}, empty={0: "; ".join(f"{rel}[{k}] holds {_holds(v)}" for k, v in found["rng"])})
    else:
        _judge_rng(info, {r: v for r, v in kinds.items()}, {0: rel} if kinds else {})
    _judge_steps(info)



def _piece_alone(ck: Any) -> str | None:
    """What ``ck`` is when it is one piece of a checkpoint saved alone (an optimizer, scheduler, loss
    scaler or RNG state dict), or None."""
    if is_optimizer_state(ck):
        det = optimizer_detail(ck)
        with_state = sum(g["with_state"] for g in det["groups"])
        return (f"an optimizer state dict ({len(det['groups'])} param group(s), {with_state} param(s) with state"
                + (f", step {det['step']}" if det["step"] is not None else "") + ")")
    if is_scheduler_state(ck):
        return f"a learning-rate scheduler state dict (last_epoch {ck.get('last_epoch', ck.get('last_batch_iteration'))})"
    if is_scaler_state(ck):
        return f"a loss scaler state dict (scale {_num(ck.get('scale', ck.get('cur_scale')))})"
    if isinstance(ck, dict) and _rng_kinds(ck) and len(_rng_kinds(ck)) >= len(ck) / 2:
        return f"an RNG state dict ({', '.join(_rng_kinds(ck))})"
    return None


#: the finding a piece's absence raises (the weights: no resume at all, said by the closing line)
_MISSING_ID = {"optimizer": ("ckpt.missing_optimizer", MSG_OPTIMIZER),
               "scheduler": ("ckpt.missing_scheduler", MSG_SCHEDULER),
               "sampler": ("ckpt.missing_sampler_state", MSG_SAMPLER),
               "rng": ("ckpt.missing_rng", "no RNG state the resume can restore: dropout masks, random augmentation "
                       "and sampling after the resume differ from an uninterrupted run")}


#: modules of the trainers whose own objects a checkpoint file may pickle (accelerate's ``sampler.bin``
#: holds its sampler object): such a file is not loaded, yet counts for its piece by its name
TRAINER_MODULES = ("accelerate.", "transformers.", "lightning.", "pytorch_lightning.", "deepspeed.")


def _drop_unsafe_pieces(info: CheckpointInfo, fp16: bool | None) -> None:
    """A piece whose files are unsafe pickles (never loaded) needing a global outside the trainers' own
    modules (:data:`TRAINER_MODULES`: ``os.system``, ``builtins.eval``, an unresolvable opcode, ...), or
    files no trainer can load (:func:`unusable`: cut short, corrupt, not a regular file), is not
    present, and its missing-piece finding is raised (the ``ckpt.unsafe_pickle`` finding names the
    globals); for the RNG piece, one such rank file is enough."""
    def hostile(f: str) -> bool:
        return f in info.files and any(not g.startswith(TRAINER_MODULES) for g in info.files[f].unsafe)

    for name, pc in info.pieces.items():
        bad = [f for f in pc.files if hostile(f) or f in info.unusable]
        if not pc.files or not bad or (name != "rng" and len(bad) < len(pc.files)):
            continue
        pc.present = False
        broken = [f for f in bad if f in info.unusable]
        if broken:
            reason = info.unusable[broken[0]]
            kept = pc.note if pc.note and not pc.note.endswith("present, not loaded") else ""
            pc.note = (f"{', '.join(broken)}: no trainer can load it ({reason}): it does not count as present"
                       + (f"; {kept}" if kept else ""))
            why = f"{', '.join(broken)} cannot be loaded ({reason}; the resume fails on it or must skip it), so "
        else:
            pc.note = (f"{', '.join(bad)}: an unsafe pickle, never loaded: it does not count as present"
                       + (f"; {pc.note}" if pc.note else ""))
            why = f"{', '.join(bad)} is an unsafe pickle (never loaded), so "
        if name == "scaler":
            if fp16:
                _missing(info, "ckpt.missing_scaler", why + MSG_SCALER, file=bad)
        elif name in _MISSING_ID:
            cid, msg = _MISSING_ID[name]
            if not any(f.check == cid for f in info.findings):
                _missing(info, cid, why + msg, file=bad)


_INSPECT = {"hf_trainer": _inspect_hf, "accelerate": _inspect_accelerate, "lightning": _inspect_lightning,
            "deepspeed": _inspect_deepspeed, "dcp": _inspect_dcp, "torch_save": _inspect_torch_save}


def inspect_checkpoint(path: str | Path, *, fp16: bool | None = None, world_size: int | None = None,
                       layout: str | None = None) -> CheckpointInfo:
    """What the checkpoint at ``path`` holds for a lossless resume, read without running its code.

    Args:
        path: a checkpoint folder or file (see the module docstring for the layouts).
        fp16: whether the run trained in fp16 with a loss scaler (``ckpt.missing_scaler`` is judged only
            when True, or when the checkpoint itself says so, as DeepSpeed's ``ds_config`` does); None: unknown.
        world_size: the data-parallel ranks of the run (default: the layout's own record, else the highest
            rank found + 1); per-rank files of the ranks below it must all be there.
        layout: force a layout (one of :data:`LAYOUTS`); default: detected.

    Raises:
        UsageError: the path does not exist or no layout is recognised; ``world_size`` < 1, or below
            a rank whose per-rank files the checkpoint holds (the message names the ranks found).
        OptionalDependencyError: torch is not installed.
    """
    p = Path(path)
    if world_size is not None and world_size < 1:
        raise UsageError(f"--world-size must be >= 1, got {world_size}")
    if layout is not None:
        if layout not in LAYOUTS:
            raise UsageError(f"--layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
        root = p
    else:
        layout, root = detect_layout(p)
    info = CheckpointInfo(path=p, root=root, layout=layout, world_size=world_size)
    _INSPECT[layout](info, _Reader(info), fp16)
    _judge_bare_optimizers(info)
    over = [r for r in info.ranks if world_size is not None and r >= world_size]
    if over:
        raise UsageError(f"--world-size is {world_size} (ranks 0 .. {world_size - 1}), but {root} holds per-rank "
                         f"files of rank(s) {', '.join(map(str, over[:10]))}{' ...' if len(over) > 10 else ''} "
                         f"(ranks found: {', '.join(map(str, info.ranks[:10]))}{' ...' if len(info.ranks) > 10 else ''}"
                         f"): give the run's world size (at least {max(over) + 1}), or drop --world-size")
    _drop_unsafe_pieces(info, fp16)
    if layout == "torch_save" and not any(pc.present for pc in info.pieces.values()) and not any(
            fs.unsafe for fs in info.files.values()):
        why = "; ".join(info.notes) or "no piece of resume state in it"
        raise UsageError(f"{p}: not a checkpoint ({why}). A checkpoint is a Hugging Face checkpoint-N/ folder, an "
                         "accelerate save_state folder, a DeepSpeed folder (latest, global_stepN/), a "
                         "torch.distributed.checkpoint folder (.metadata), a Lightning .ckpt, or a torch.save file of "
                         "a dict holding the model weights (and the optimizer, scheduler, RNG, ... states)")
    if not info.pieces["weights"].present:
        info.notes.append("no model weights found: the run cannot resume from this checkpoint at all")
    return info


def resumable(info: CheckpointInfo) -> bool:
    """Whether the checkpoint holds model weights (without them there is nothing to resume)."""
    return info.pieces["weights"].present


def summary_lines(info: CheckpointInfo) -> list[str]:
    """The text report: one line per piece, then the findings and notes."""
    out = [f"{info.root} ({info.layout}" + (f", step {info.step}" if info.step is not None else "") + ")"]
    flagged = {f.check for f in info.findings}
    for name, pc in info.pieces.items():
        mark = "present" if pc.present else "MISSING"
        if name == "scaler" and not pc.present and "ckpt.missing_scaler" not in flagged:
            mark = "not needed (not fp16)"
        extra = ""
        if name == "optimizer" and pc.detail.get("groups"):
            extra = "; " + ", ".join(f"group {g['group']}: {g['with_state']}/{g['params']} params, buffers "
                                     f"{'+'.join(g['buffers']) or 'none'}" for g in pc.detail["groups"])
        elif name == "rng" and pc.detail.get("ranks"):
            extra = "; " + ", ".join(f"rank {r}: {'+'.join(k) if k else 'not read'}" for r, k in pc.detail["ranks"].items())
        elif name == "step" and info.steps:
            extra = "; " + ", ".join(f"{k} {v}" for k, v in info.steps.items())
        where = f" ({', '.join(pc.files[:3])})" if pc.files else ""
        note = f" [{pc.note}]" if pc.note else ""
        out.append(f"  {name:<9} {mark}{where}{extra}{note}")
    for f in info.findings:
        out.append(f"{f.severity}: {f.check}: {f.message}")
    for n in info.notes:
        out.append(f"note: {n}")
    absent = [n for n, pc in info.pieces.items() if not pc.present and n != "scaler"]
    if not resumable(info):
        out.append("no model weights found: not a resumable checkpoint")
    elif not info.findings and not absent:
        out.append("every piece of a lossless resume is present and the steps agree")
    elif not info.findings:
        out.append(f"no finding, but not every piece was found: {', '.join(absent)} (see above)")
    return out

