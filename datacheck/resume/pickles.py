"""Reading checkpoint files without running their code.

A checkpoint file is read in this order, and stops at the first step that finds a reason not to go on:

1. **Static scan** (:func:`scan_file`): the bytes are classified by their magic (zip archive, gzip,
   safetensors header, raw pickle) without unpickling anything. For a ``torch.save`` zip archive only
   the member names (the zip's central directory) and its one ``data.pkl`` member are read; the tensor
   storages (``<archive>/data/<key>``) are never read here. The pickle's opcodes are walked with
   :func:`pickletools.genops` and every global it would import is named (``GLOBAL`` and ``INST``
   arguments, ``STACK_GLOBAL`` resolved from the two strings pushed before it; a ``STACK_GLOBAL``
   whose operands are not plain strings, and the copyreg extension opcodes ``EXT1/2/4``, are named as
   unresolvable). A TorchScript archive (a ``code/`` member or ``constants.pkl``) is refused: loading
   it compiles and runs its code.
2. **Allowlist**: a global is safe when ``torch.load(weights_only=True)`` itself accepts it
   (``torch._weights_only_unpickler._get_allowed_globals``: tensors, storages, dtypes, ``Size``,
   ``OrderedDict``, ``set``, ``_codecs.encode``) or it is one of the numpy names of an RNG state
   (:data:`NUMPY_RNG_GLOBALS`: ``np.random.get_state()`` pickles a ``uint32`` ndarray and its dtype,
   as Hugging Face's ``rng_state.pth`` and accelerate's ``random_states_<r>.pkl`` hold). A file
   needing any other global is never loaded; the globals are reported (``ckpt.unsafe_pickle``).
3. **Load** (:func:`load_safe`): only files whose every global passed, through
   ``torch.load(weights_only=True, mmap=True)`` (zip archives: storages are memory-mapped, so a
   100 GB optimizer file is opened without reading its tensors; only the values the inspection
   touches, such as a 0-d ``step`` tensor, are paged in) inside ``torch.serialization.safe_globals``
   holding the numpy RNG names only. A legacy (non-zip) ``torch.save`` file is loaded only up to
   :data:`LEGACY_LOAD_MAX_BYTES` (it cannot be memory-mapped); a larger one is described by its
   globals alone.

torch's ``.distcp`` metadata (``.metadata``, a raw pickle of ``torch.distributed.checkpoint.metadata``
dataclasses) is loaded by :func:`load_dcp_metadata` with a :class:`pickle.Unpickler` whose
``find_class`` returns only the names of :data:`DCP_METADATA_GLOBALS` (Python's "Restricting
Globals" recipe), after the same static scan.

Safetensors files are described from their header alone (:func:`safetensors_header`: an 8-byte
little-endian length, then that many bytes of JSON; at most :data:`SAFETENSORS_HEADER_MAX` bytes,
safetensors' own limit).
"""
from __future__ import annotations

import _compat_pickle
import importlib
import io
import json
import os
import pickle
import pickletools
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datacheck.io.bounded import NotRegular, open_regular
from datacheck.model.torchdep import require_torch

__all__ = ["PickleScan", "scan_pickle", "scan_file", "FileScan", "load_safe", "load_dcp_metadata",
           "safetensors_header", "NUMPY_RNG_GLOBALS", "DCP_METADATA_GLOBALS", "LEGACY_LOAD_MAX_BYTES",
           "SAFETENSORS_HEADER_MAX", "PICKLE_MAX_BYTES", "UnsafeCheckpoint", "is_safe_global"]

#: numpy names an RNG state pickles (``np.random.get_state()``: a ``uint32`` ndarray, its dtype;
#: numpy 1.x names ``numpy.core``, numpy 2.x ``numpy._core``); data only, no user code.
NUMPY_RNG_GLOBALS = frozenset({
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct", "numpy.ndarray", "numpy.dtype",
    "numpy.dtypes.UInt32DType", "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.dtypes.Int64DType", "numpy.dtypes.Float64DType",
})
#: what ``torch.distributed.checkpoint``'s ``.metadata`` pickles (its metadata dataclasses, the layout
#: and memory format of each tensor, ``torch.Size``, the checkpoint id as a path); loaded only with these
#: names and torch's weights_only allowlist (dtypes).
DCP_METADATA_GLOBALS = frozenset({
    "torch.distributed.checkpoint.metadata.Metadata", "torch.distributed.checkpoint.metadata.TensorStorageMetadata",
    "torch.distributed.checkpoint.metadata.BytesStorageMetadata",
    "torch.distributed.checkpoint.metadata.ChunkStorageMetadata",
    "torch.distributed.checkpoint.metadata.TensorProperties", "torch.distributed.checkpoint.metadata.MetadataIndex",
    "torch.distributed.checkpoint.metadata.StorageMeta", "torch.distributed.checkpoint.filesystem._StorageInfo",
    "torch.distributed.checkpoint.metadata._MEM_FORMAT_ENCODING", "torch.Size", "collections.OrderedDict",
    "torch.strided", "torch.sparse_coo", "torch.contiguous_format", "torch.channels_last", "torch.preserve_format",
    "torch.serialization._get_layout", "pathlib.PosixPath", "pathlib.WindowsPath", "pathlib.PurePosixPath",
})
#: a legacy (non-zip) torch.save file larger than this is not loaded (it cannot be memory-mapped)
LEGACY_LOAD_MAX_BYTES = 256 * 1024 * 1024
#: safetensors refuses headers over 100 MB (its ``MAX_HEADER_SIZE``); so does datacheck
SAFETENSORS_HEADER_MAX = 100_000_000
#: a pickle (a zip's ``data.pkl``, a raw pickle file) larger than this is not scanned: its globals are unknown
PICKLE_MAX_BYTES = 512 * 1024 * 1024


class UnsafeCheckpoint(Exception):
    """A file that must not be loaded (a global outside the allowlist, TorchScript, or unscannable)."""


@dataclass
class PickleScan:
    """The globals one pickle stream would import, read from its opcodes.

    Attributes:
        globals: ``module.name`` of every global, in first-seen order.
        unresolved: opcodes that fetch a callable datacheck cannot name statically (a ``STACK_GLOBAL``
            over computed operands, ``EXT1/2/4``), as text.
        strings: the short strings the pickle pushes (at most 4096 of them, each at most 200
            characters): dictionary keys such as ``exp_avg`` or ``last_epoch`` name what a file holds.
        end: the byte offset just after its ``STOP`` opcode.
        error: why the scan stopped early (a malformed pickle), or None.
    """

    globals: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    end: int = 0
    error: str | None = None


_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING",
               "SHORT_BINBYTES", "BINBYTES", "BINBYTES8"}
_MEMO_PUT = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GET = {"GET", "BINGET", "LONG_BINGET"}
_MAX_STRINGS = 4096


def scan_pickle(data: bytes, start: int = 0) -> PickleScan:
    """Walk one pickle stream of ``data`` from ``start`` to its ``STOP`` and name its globals (nothing
    is unpickled). Never raises: a malformed stream sets :attr:`PickleScan.error`."""
    out = PickleScan()
    seen: set[str] = set()
    memo: dict[int, Any] = {}
    recent: list[Any] = []  # the values of the last pushes (strings, or None for anything else)
    stream = io.BytesIO(data)
    stream.seek(start)

    def add(name: str) -> None:
        if name not in seen:
            seen.add(name)
            out.globals.append(name)

    try:
        for op, arg, pos in pickletools.genops(stream):
            name = op.name
            if name in _STRING_OPS:
                value = arg.decode("latin-1") if isinstance(arg, bytes) else arg
                recent.append(value)
                if isinstance(value, str) and len(out.strings) < _MAX_STRINGS and len(value) <= 200:
                    out.strings.append(value)
            elif name in _MEMO_PUT:
                memo[int(arg)] = recent[-1] if recent else None
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif name in _MEMO_GET:
                recent.append(memo.get(int(arg)))
            elif name in ("GLOBAL", "INST"):
                add(".".join(str(arg).split(" ", 1)))
                recent.append(None)
            elif name == "STACK_GLOBAL":
                mod, qual = (recent[-2], recent[-1]) if len(recent) >= 2 else (None, None)
                if isinstance(mod, str) and isinstance(qual, str):
                    add(f"{mod}.{qual}")
                else:
                    out.unresolved.append(f"STACK_GLOBAL at byte {pos} over operands that are not plain strings")
                recent.append(None)
            elif name in ("EXT1", "EXT2", "EXT4"):
                out.unresolved.append(f"{name} {arg} (a copyreg extension code) at byte {pos}")
                recent.append(None)
            elif name == "STOP":
                out.end = stream.tell()
                break
            else:
                recent.append(None)
            if len(recent) > 8:
                del recent[:-4]
    except Exception as e:  # noqa: BLE001 - pickletools raises ValueError and others on malformed streams
        out.error = f"{type(e).__name__}: {e}"
    return out


def unpickled_name(name: str) -> str:
    """The name unpickling imports for ``name``: protocol 0-2 pickles name Python 2 modules
    (``__builtin__.set``, ``copy_reg._reconstructor``), which the unpickler maps to Python 3's
    (:mod:`_compat_pickle`, as ``fix_imports=True`` does)."""
    mod, _, attr = name.rpartition(".")
    if (mod, attr) in _compat_pickle.NAME_MAPPING:
        return ".".join(_compat_pickle.NAME_MAPPING[(mod, attr)])
    return f"{_compat_pickle.IMPORT_MAPPING.get(mod, mod)}.{attr}"


def is_safe_global(name: str) -> bool:
    """Whether ``torch.load(weights_only=True)`` accepts ``name`` by default, or it is a numpy RNG name
    (Python 2 module names mapped as the unpickler maps them)."""
    n = unpickled_name(name)
    return n in NUMPY_RNG_GLOBALS or n in _torch_allowed()


_ALLOWED: set[str] | None = None


def _torch_allowed() -> set[str]:
    global _ALLOWED
    if _ALLOWED is None:
        torch = require_torch("datacheck checkpoint")
        _ALLOWED = set(torch._weights_only_unpickler._get_allowed_globals().keys())
    return _ALLOWED


@dataclass
class FileScan:
    """What the static scan of one file found.

    Attributes:
        path: the file.
        kind: ``torch_zip`` | ``torch_legacy`` | ``pickle`` | ``safetensors`` | ``torchscript`` | ``other``.
        bytes: its size.
        members: zip member names (``torch_zip``), without the archive's top folder.
        globals: every global its pickle(s) need.
        unsafe: the globals (and unresolvable opcodes) outside the allowlist; the file is never loaded when
            this is not empty.
        strings: short strings the pickle pushes (keys of the dicts it holds).
        error: why it could not be scanned (then it is not loaded either), or None.
    """

    path: Path
    kind: str
    bytes: int
    members: list[str] = field(default_factory=list)
    globals: list[str] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def loadable(self) -> bool:
        return self.kind in ("torch_zip", "torch_legacy") and not self.unsafe and self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bytes": self.bytes, "globals": self.globals, "unsafe": self.unsafe,
                "error": self.error}


def _judge(fs: FileScan, scans: list[PickleScan], allowed: Any = None) -> None:
    for sc in scans:
        for g in sc.globals:
            if g not in fs.globals:
                fs.globals.append(g)
        fs.unsafe.extend(sc.unresolved)
        fs.strings.extend(sc.strings)
        if sc.error and fs.error is None:
            fs.error = f"malformed pickle ({sc.error})"
    ok = allowed if allowed is not None else is_safe_global
    fs.unsafe.extend(g for g in fs.globals if not ok(g))


def scan_file(path: str | Path, allowed: Any = None) -> FileScan:
    """Classify ``path`` by its bytes and name every global its pickle(s) need (nothing is unpickled;
    a zip archive's tensor storages are not read).

    Args:
        path: the file.
        allowed: ``name -> bool`` of the globals allowed (default :func:`is_safe_global`).
    """
    p = Path(path)
    try:
        with open_regular(p) as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(16)
    except NotRegular as e:  # a FIFO would block the open, a folder named like a file cannot be read
        return FileScan(p, "other", 0, error=e.reason)
    except OSError as e:
        return FileScan(p, "other", 0, error=f"cannot read it ({e.strerror or e})")
    if zipfile.is_zipfile(p):
        fs = FileScan(p, "torch_zip", size)
        try:
            with zipfile.ZipFile(p) as z:
                names = z.namelist()
                fs.members = [n.split("/", 1)[1] if "/" in n else n for n in names]
                if any(m.startswith("code/") or m == "constants.pkl" for m in fs.members):
                    fs.kind = "torchscript"
                    fs.unsafe.append("a TorchScript archive (code/): loading it compiles and runs its code")
                    return fs
                pkl = [n for n in names if n.split("/", 1)[-1] == "data.pkl"]
                if len(pkl) != 1:
                    fs.kind, fs.error = "other", "a zip archive without one data.pkl (not a torch.save file)"
                    return fs
                info = z.getinfo(pkl[0])
                if info.file_size > PICKLE_MAX_BYTES:
                    fs.error = f"data.pkl is {info.file_size} bytes (over {PICKLE_MAX_BYTES}): not scanned, not loaded"
                    return fs
                data = z.read(pkl[0])
        except (zipfile.BadZipFile, OSError, KeyError) as e:
            fs.kind, fs.error = "other", f"unreadable zip archive ({e})"
            return fs
        _judge(fs, [scan_pickle(data)], allowed)
        return fs
    if len(head) >= 8 and head[8:9] == b"{":
        n = struct.unpack("<Q", head[:8])[0]
        if 0 < n <= SAFETENSORS_HEADER_MAX and n + 8 <= size:
            return FileScan(p, "safetensors", size)
    if head[:1] == b"\x80":  # a pickle protocol opcode: a raw pickle, or a legacy torch.save stream
        if size > PICKLE_MAX_BYTES and not head[:2] == b"\x80\x02":
            return FileScan(p, "pickle", size, error=f"{size} bytes of pickle: not scanned, not loaded")
        with open(p, "rb") as f:
            data = f.read(min(size, PICKLE_MAX_BYTES))
        first = scan_pickle(data)
        fs = FileScan(p, "pickle", size)
        scans = [first]
        # torch.save's legacy format: the magic number 0x1950a86a20f9469cfc6c (an int), the protocol
        # version, a sys_info dict, then the object and the list of storage keys (tensor bytes follow)
        if first.error is None and first.globals == [] and _legacy_magic(data[:first.end]):
            fs.kind = "torch_legacy"
            at = first.end
            for _ in range(4):
                sc = scan_pickle(data, at)
                scans.append(sc)
                if sc.error:
                    break
                at = sc.end
        _judge(fs, scans, allowed)
        return fs
    if head[:1] in _TEXT_PICKLE_START and size <= PICKLE_MAX_BYTES:  # protocol 0-1: no PROTO opcode
        with open(p, "rb") as f:
            data = f.read(size)
        sc = scan_pickle(data)
        if sc.globals or (sc.error is None and sc.end > 0):  # a pickle stream (or one that names globals)
            fs = FileScan(p, "pickle", size)
            _judge(fs, [sc], allowed)
            return fs
    return FileScan(p, "other", size)


#: the first opcodes of a protocol 0-1 pickle (no ``PROTO`` header) that can lead to a call: ``GLOBAL``
#: (``c``), ``INST`` (``i``), ``MARK`` (``(``, before ``OBJ``/``INST``/a tuple), ``EMPTY_LIST`` / ``EMPTY_DICT``
#: / ``EMPTY_TUPLE`` (``]``, ``}``, ``)``), ``PUT``/``BINPUT`` (``p``/``q``), ``NONE`` (``N``), the string
#: pushes (``S``, ``V``, ``X``, ``U``, ``T``) and number pushes (``I``, ``L``, ``F``, ``J``, ``K``, ``M``, ``G``)
_TEXT_PICKLE_START = frozenset(bytes([c]) for c in b"ci(]})pqNSVXUTILFJKMG")


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C


def _legacy_magic(first: bytes) -> bool:
    """Whether the first pickle of a stream (one without globals: plain values only) is torch's magic number."""
    try:
        return pickle.loads(first) == _LEGACY_MAGIC
    except Exception:  # noqa: BLE001 - any bytes that are not the magic number's pickle
        return False


def load_safe(fs: FileScan) -> Any:
    """Load a file that passed :func:`scan_file` through ``torch.load(weights_only=True)`` (zip archives
    memory-mapped), with only the numpy RNG names added to torch's allowlist.

    Raises:
        UnsafeCheckpoint: the scan named a global outside the allowlist, found TorchScript or could
            not scan it, or a legacy file is over :data:`LEGACY_LOAD_MAX_BYTES`; torch refused it.
    """
    if not fs.loadable:
        raise UnsafeCheckpoint("; ".join(fs.unsafe) or fs.error or f"not a torch.save file ({fs.kind})")
    if fs.kind == "torch_legacy" and fs.bytes > LEGACY_LOAD_MAX_BYTES:
        raise UnsafeCheckpoint(f"legacy torch.save file of {fs.bytes} bytes (over {LEGACY_LOAD_MAX_BYTES}): "
                               "cannot be memory-mapped; described by its globals only")
    torch = require_torch("datacheck checkpoint")
    extra = [v for v in _numpy_objects(fs.globals) if v is not None]
    mmap = fs.kind == "torch_zip"
    for attempt in (mmap, False) if mmap and fs.bytes <= LEGACY_LOAD_MAX_BYTES else (mmap,):
        try:
            with torch.serialization.safe_globals(extra):
                return torch.load(fs.path, map_location="cpu", weights_only=True, mmap=attempt)
        except Exception as e:  # noqa: BLE001 - torch raises UnpicklingError, RuntimeError, ... on refused files
            if attempt and "mmap" in str(e).lower():
                continue  # an archive torch cannot map (written before torch 2.1): read it, when small enough
            raise UnsafeCheckpoint(f"torch.load(weights_only=True) refused it: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}") from None
    raise UnsafeCheckpoint(f"a {fs.bytes}-byte archive torch cannot memory-map: not read (over "
                           f"{LEGACY_LOAD_MAX_BYTES} bytes)")


def _numpy_objects(names: list[str]) -> list[Any]:
    out: list[Any] = []
    wanted = [n for n in names if n in NUMPY_RNG_GLOBALS]
    if not wanted:
        return out
    # a dtype is rebuilt by BUILD on an instance of its class (numpy.dtypes.UInt32DType), never named by a
    # GLOBAL: the dtype classes of the allowlist are added whenever the file names a numpy global
    wanted += sorted(n for n in NUMPY_RNG_GLOBALS if n.startswith("numpy.dtypes.") and n not in wanted)
    for n in wanted:  # numpy's module names differ between 1.x and 2.x: import what the file names

        mod, _, attr = n.rpartition(".")
        try:
            out.append(getattr(importlib.import_module(mod), attr))
        except (ImportError, AttributeError):
            out.append(None)
    return out


class _DcpUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        full = f"{module}.{name}"
        if not _dcp_allowed(full):  # find_class gets the mapped names already (fix_imports)
            raise pickle.UnpicklingError(f"global {full} is not allowed in a .metadata file")
        return super().find_class(module, name)


def _dcp_allowed(name: str) -> bool:
    n = unpickled_name(name)
    return n in DCP_METADATA_GLOBALS or n in _torch_allowed()


def load_dcp_metadata(path: str | Path) -> tuple[Any, FileScan]:
    """Scan and load a ``torch.distributed.checkpoint`` ``.metadata`` file with only
    :data:`DCP_METADATA_GLOBALS` allowed.

    Raises:
        UnsafeCheckpoint: it needs another global, or it is not a pickle.
    """
    fs = scan_file(path, allowed=_dcp_allowed)
    if fs.kind != "pickle" or fs.unsafe or fs.error:
        raise UnsafeCheckpoint("; ".join(fs.unsafe) or fs.error or f"not a pickle ({fs.kind})")
    require_torch("datacheck checkpoint")  # the dataclasses' module imports torch
    with open(fs.path, "rb") as f:
        try:
            return _DcpUnpickler(f).load(), fs
        except Exception as e:  # noqa: BLE001 - a refused or malformed pickle
            raise UnsafeCheckpoint(f"{type(e).__name__}: {e}") from None


def safetensors_header(path: str | Path) -> dict[str, Any]:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, offsets; ``__metadata__``),
    read from its first ``8 + N`` bytes only.

    Raises:
        ValueError: the length prefix is over :data:`SAFETENSORS_HEADER_MAX` or past the file's end,
            the header is not a JSON object, or its tensors do not cover the data after it as the
            ``safetensors`` loader requires (:func:`_check_safetensors_data`: a file cut short).
        OSError: not a regular file (:class:`~datacheck.io.bounded.NotRegular`: never opened), unreadable.
    """
    p = Path(path)
    with open_regular(p) as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(8)
        if len(raw) < 8:
            raise ValueError("shorter than the 8-byte header length")
        n = struct.unpack("<Q", raw)[0]
        if n > SAFETENSORS_HEADER_MAX or n + 8 > size:
            raise ValueError(f"header length {n} is over the limit or past the end of the file ({size} bytes)")
        head = json.loads(f.read(n))
    if not isinstance(head, dict):
        raise ValueError("the header is not a JSON object")
    _check_safetensors_data(head, size - 8 - n)
    return head


#: bytes per element of the safetensors dtypes (``safetensors`` ``Dtype``)
_ST_DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
                   "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def _check_safetensors_data(head: dict[str, Any], data_bytes: int) -> None:
    """The rules the ``safetensors`` loader holds a file to: every tensor's ``data_offsets`` lie in the
    data after the header, its byte count is its shape times its dtype's size, and the tensors end
    exactly where the file does (a file cut short, or with bytes after its tensors, does not load).

    Raises:
        ValueError: the first rule broken, naming the tensor.
    """
    end = 0
    for name, t in head.items():
        if name == "__metadata__":
            continue
        offs = t.get("data_offsets") if isinstance(t, dict) else None
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) and not isinstance(o, bool)
                                                                   for o in offs) and 0 <= offs[0] <= offs[1]):
            raise ValueError(f"tensor {name[:80]!r}: data_offsets {str(offs)[:40]} is not [begin, end]")
        if offs[1] > data_bytes:
            raise ValueError(f"tensor {name[:80]!r} ends at byte {offs[1]} of the data, but the file holds "
                             f"{data_bytes} bytes of tensor data (a file cut short)")
        shape, size = t.get("shape"), _ST_DTYPE_BYTES.get(str(t.get("dtype")))
        if size is not None and isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            want = size
            for d in shape:
                want *= d
            if want != offs[1] - offs[0]:
                raise ValueError(f"tensor {name[:80]!r}: {t.get('dtype')} {shape} needs {want} bytes, its offsets "
                                 f"give {offs[1] - offs[0]}")
        end = max(end, offs[1])
    if end != data_bytes:
        raise ValueError(f"the tensors end at byte {end} of the data but the file holds {data_bytes} bytes after "
                         "its header (bytes after the last tensor)")
