"""Object stores: where a shard's bytes come from when PATH is a URL (``s3://``, ``gs://``, ``hf://``,
or any other fsspec protocol), not how they are decoded.

Every store is reached through `fsspec <https://filesystem-spec.readthedocs.io>`_ and the store's own
fsspec implementation, imported lazily (``import datacheck`` imports none of them):

========  =========================  ================================================
scheme    package (datacheck extra)  install
========  =========================  ================================================
s3://     s3fs (``s3``)              ``pip install "s3fs>=2024.2"``
gs://     gcsfs (``gcs``)            ``pip install "gcsfs>=2024.2"``
hf://     huggingface_hub (``hf``)   ``pip install "huggingface_hub>=0.23"``
========  =========================  ================================================

Credentials and endpoints are the stores' own: for S3, botocore's environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``AWS_REGION`` ...) and ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``) for an S3-compatible server (MinIO, moto, R2): botocore >= 1.31 reads it.

Retries: a request that fails with a connection error, a timeout or throttling (``SlowDown``, HTTP
503) is retried by the store's client: s3fs retries ``retries`` times with exponential backoff
(1.7**i x 0.1 s, at most 15 s) and botocore's ``standard`` retry mode ``max_attempts`` times; both are
set to :data:`STORE_RETRIES` (``$DATACHECK_STORE_RETRIES``, default 5). A read that still fails is an
``OSError`` here and an unreadable shard naming the URL in the report, never a crash.

Content hashes without downloading (:func:`store_checksum`): a shard's content hash is normally the
xxh3-128 of its bytes (:mod:`datacheck.io.hashing`), which needs every byte. Where the store gives a
checksum that is a hash of the object's bytes alone, it is used instead (``md5:<32 hex>`` or
``sha256:<64 hex>``), so an unchanged shard is answered from the cache after one metadata request:

- S3: the ``ETag`` is the MD5 of the bytes only for an object uploaded in one part (a plain PUT)
  that is stored as plaintext or with SSE-S3. A multipart upload's ETag is the MD5 of the parts'
  MD5s followed by ``-<parts>`` (the same bytes uploaded with another part size give another ETag),
  and objects encrypted with SSE-KMS, DSSE-KMS or SSE-C have ETags that are not an MD5 of the data
  (Amazon S3 API reference: "The entity tag may or may not be an MD5 digest of the object data. If
  the entity tag is not an MD5 digest of the object data, it will contain one or more nonhexadecimal
  characters and/or will consist of less than 32 or more than 32 hexadecimal digits"; the ETag rules
  under server-side encryption in the S3 user guide). So an ETag is used only when it is exactly 32
  hex digits and ``HeadObject`` reports neither ``ServerSideEncryption`` ``aws:kms``/``aws:kms:dsse``
  nor ``SSECustomerAlgorithm``. It is one ``HeadObject`` request per shard.
- Google Cloud Storage: ``md5Hash`` (base64 MD5 of the bytes; composite objects have none and fall
  back to hashing the bytes).
- Hugging Face Hub: the Git LFS object id of a file stored in LFS (``lfs.sha256``: SHA-256 of the
  bytes; small files in plain Git have only a Git blob id and are hashed).

Why it is safe: each of these is a hash of exactly the object's bytes, computed by the store, so equal
checksums mean equal bytes (MD5 is broken against a chosen collision, not by accident: someone able to
write two colliding shards into the bucket can also write a bad shard). Every other checksum (multipart
ETags, CRC32C, versions, modification times) is never taken as the content: those shards are hashed
streaming. ``DATACHECK_STORE_CHECKSUMS=0`` turns store checksums off (every shard hashed, so content
hashes equal those of a local copy, which a committed ``[dataset] index`` of xxh3-128 hashes needs).
"""
from __future__ import annotations

import os
import re
import sys
from urllib.parse import urlsplit

import xxhash

from datacheck.model.constants import HASH_ALGORITHM
from datacheck.model.errors import OptionalDependencyError, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing on a cached rerun's path (3 ms)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ENV_RETRIES", "ENV_CHECKSUMS", "STORE_RETRIES", "is_url", "scheme_of", "filesystem", "store_checksum",
           "hash_object", "object_state", "join_url", "strip_scheme", "store_checksums_enabled",
           "connection_error", "unreachable_message"]

ENV_RETRIES = "DATACHECK_STORE_RETRIES"
ENV_CHECKSUMS = "DATACHECK_STORE_CHECKSUMS"
#: Default retries of a failed store request (s3fs ``retries`` and botocore ``max_attempts``).
STORE_RETRIES = 5
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_CHUNK = 1 << 24  # 16 MiB reads, as for local files
#: scheme -> (datacheck extra, requirement)
_EXTRAS = {
    "s3": ("s3", "s3fs>=2024.2"), "s3a": ("s3", "s3fs>=2024.2"),
    "gs": ("gcs", "gcsfs>=2024.2"), "gcs": ("gcs", "gcsfs>=2024.2"),
    "hf": ("hf", "huggingface_hub>=0.23"),
}
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def is_url(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a URL of another filesystem than the local one (``scheme://...``;
    ``file://`` is local)."""
    m = _URL.match(str(path))
    return m is not None and m.group(1).lower() != "file"


def scheme_of(url: str) -> str:
    """The URL's scheme, lower case (``"s3"`` for ``s3://bucket/key``)."""
    m = _URL.match(url)
    return m.group(1).lower() if m else ""


def strip_scheme(url: str) -> str:
    """``url`` without ``scheme://``."""
    return _URL.sub("", url, count=1)


def join_url(scheme: str, path: str) -> str:
    """``scheme://path``."""
    return f"{scheme}://{path}"


def _retries() -> int:
    raw = os.environ.get(ENV_RETRIES, "").strip()
    if not raw:
        return STORE_RETRIES
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 1:
        raise UsageError(f"{ENV_RETRIES}={raw!r}: expected a positive number of attempts (default {STORE_RETRIES})")
    return n


def store_checksums_enabled() -> bool:
    """False when ``$DATACHECK_STORE_CHECKSUMS`` is ``0``/``false``/``no``/``off`` (every shard is hashed)."""
    return os.environ.get(ENV_CHECKSUMS, "1").strip().lower() not in ("0", "false", "no", "off")


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it) for ``url``, with the retry settings of the module docstring.

    Raises:
        OptionalDependencyError: fsspec or the store's package is not installed (the message names the
            datacheck extra and the ``pip install`` command).
        UsageError: the URL's protocol is unknown to fsspec, or the store refuses its options.
    """
    scheme = scheme_of(url)
    extra, req = _EXTRAS.get(scheme, (None, None))
    hint = (f"the datacheck[{extra}] extra is not installed: pip install \"{req}\" (or pip install -e \".[{extra}]\" "
            "from datacheck's source folder)") if extra else \
        'install fsspec and the fsspec implementation of this protocol: pip install "fsspec>=2024.2"'
    try:
        import fsspec.core
    except ImportError as exc:
        raise OptionalDependencyError(f"{url}: reading from object stores needs fsspec ({exc}); {hint}") from None
    n = _retries()
    options: dict[str, Any] = {}
    if scheme in ("s3", "s3a"):
        options = {"config_kwargs": {"retries": {"max_attempts": n, "mode": "standard"}}}
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise OptionalDependencyError(f"{url}: {str(exc).splitlines()[0]}; {hint}") from None
    except ValueError as exc:
        raise UsageError(f"{url}: {str(exc).splitlines()[0] if str(exc) else exc}; give a URL fsspec knows "
                         "(s3://, gs://, hf://, ...) or a local path") from None
    if hasattr(fs, "retries"):
        fs.retries = n
    return fs, path


#: class names (anywhere in an exception's MRO) of the store clients' "could not connect" errors: aiohttp's
#: (fsspec's http://, gcsfs, huggingface_hub's async paths) and botocore's (s3fs); Python's own
#: ``ConnectionError`` (refused, reset), ``socket.gaierror`` (unknown host) and ``TimeoutError`` are
#: taken by type (``socket`` from ``sys.modules``: a gaierror exists only once a client loaded it, and
#: importing it here cost every command, a cached rerun's too, 4 ms)
_CONNECT_ERRORS = frozenset({"ClientConnectorError", "ClientConnectionError", "ServerTimeoutError",
                             "EndpointConnectionError", "ConnectTimeoutError", "ProxyConnectionError",
                             "ConnectionClosedError", "ConnectionError", "ConnectError"})


def connection_error(exc: BaseException) -> BaseException | None:
    """The error in ``exc``'s chain (itself, its ``__cause__`` and ``__context__``, however deep) that
    says the store's endpoint could not be reached (connection refused or reset, unknown host, a
    connect timeout, botocore's ``EndpointConnectionError``), else None: a missing object, a denied
    request or any other answer of a reached server is not one. fsspec's ``http://`` filesystem answers
    ``FileNotFoundError`` for a refused connection; its cause tells them apart."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        sock = sys.modules.get("socket")
        if isinstance(e, (ConnectionError, TimeoutError)) or (sock is not None and isinstance(e, sock.gaierror)) or any(
                c.__name__ in _CONNECT_ERRORS for c in type(e).__mro__):
            return e
        todo += [x for x in (e.__cause__, e.__context__) if x is not None]
    return None


def _endpoint(url: str, err: BaseException) -> str:
    """The endpoint an unreachable URL names: ``scheme://host:port`` of an ``http(s)://`` URL, else of the
    request URL botocore's error carries (``endpoint_url``), else of ``$AWS_ENDPOINT_URL(_S3)`` for
    ``s3://``, else the URL's scheme and host."""
    scheme = scheme_of(url)
    if scheme in ("http", "https"):
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"
    kw = getattr(err, "kwargs", None)
    req = kw.get("endpoint_url") if isinstance(kw, dict) else None
    if isinstance(req, str) and "://" in req:
        parts = urlsplit(req)
        return f"{parts.scheme}://{parts.netloc}"
    if scheme in ("s3", "s3a"):
        env = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        return env or "the S3 endpoint (AWS's, from AWS_REGION)"
    return f"{scheme}://{strip_scheme(url).partition('/')[0]}"


def unreachable_message(url: str, exc: BaseException) -> str | None:
    """When ``exc`` is a failure to reach the store (:func:`connection_error`): the message that names the
    endpoint, the client's reason and what to do, saying that nothing was read (not that the object is
    missing); else None."""
    err = connection_error(exc)
    if err is None:
        return None
    endpoint = _endpoint(url, err)
    detail = str(err).splitlines()[0] if str(err) else type(err).__name__
    env = " (and AWS_ENDPOINT_URL when it names one)" if scheme_of(url) in ("s3", "s3a") else ""
    return (f"the endpoint {endpoint} could not be reached ({type(err).__name__}: {detail}), so whether {url} exists is "
            f"not known: start the server or fix the host and port in the URL{env}, check the network or proxy, "
            f"and run again")


def _s3_checksum(fs: Any, path: str, info: dict[str, Any]) -> str | None:
    """``md5:<hex>`` from an S3 object's ETag when it is the MD5 of the bytes (see the module docstring)."""
    etag = str(info.get("ETag") or info.get("etag") or "").strip('"').lower()
    if not _HEX32.match(etag):
        return None  # multipart ("...-N") or another store's opaque tag
    bucket, _, key = path.partition("/")
    try:
        head = fs.call_s3("head_object", Bucket=bucket, Key=key)
    except Exception:  # noqa: BLE001 - no proof of a plain MD5 ETag: hash the bytes instead
        return None
    sse = str(head.get("ServerSideEncryption") or "").lower()
    if sse.startswith("aws:kms") or head.get("SSECustomerAlgorithm"):
        return None
    etag2 = str(head.get("ETag") or "").strip('"').lower()
    return f"md5:{etag2}" if etag2 == etag else None


def store_checksum(fs: Any, path: str, info: dict[str, Any]) -> str | None:
    """The store's hash of the object's bytes (``"md5:<32 hex>"`` or ``"sha256:<64 hex>"``), or None when
    the store gives none that is a hash of the bytes alone (then the bytes are hashed).

    Args:
        fs: the object's fsspec filesystem.
        path: the object's path within ``fs``.
        info: its listing entry (``fs.info(path)`` or a ``find(detail=True)`` value).

    The rules per store and why they are safe: the module docstring.
    """
    if not store_checksums_enabled():
        return None
    protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    if "s3" in protocols or "s3a" in protocols:
        return _s3_checksum(fs, path, info)
    if "gs" in protocols or "gcs" in protocols:
        md5 = info.get("md5Hash")
        if isinstance(md5, str) and md5:
            try:
                import base64  # a store's checksum only: not on a local audit's path

                raw = base64.b64decode(md5, validate=True)
            except ValueError:
                return None
            return f"md5:{raw.hex()}" if len(raw) == 16 else None
        return None
    if "hf" in protocols:
        lfs = info.get("lfs")
        sha = lfs.get("sha256") if isinstance(lfs, dict) else None
        return f"sha256:{sha.lower()}" if isinstance(sha, str) and _HEX64.match(sha.lower()) else None
    return None


def hash_object(fs: Any, paths: list[str]) -> tuple[str, int]:
    """xxh3-128 of the bytes of ``paths`` read in order as one stream (as
    :func:`datacheck.io.hashing.hash_files` does for local files), and their total size.

    Raises:
        OSError: a read failed after the store client's retries.
    """
    h = xxhash.xxh3_128()
    size = 0
    for p in paths:
        try:
            with fs.open(p, "rb", block_size=_CHUNK) as f:
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - a store client's error after its retries is a failed read
            raise OSError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else exc}") from exc
    return f"{HASH_ALGORITHM}:{h.hexdigest()}", size


def object_state(fs: Any, path: str) -> tuple[int, str, str, str]:
    """What identifies the object's version without reading it, from a fresh metadata request:
    (size in bytes, modification time, version tag, version tag); the tag joins the ETag / checksum /
    generation fields the store gives. The shape of :func:`datacheck.io.hashing.file_state` (size,
    mtime, ctime, identity): equal before and after a read when no writer replaced the object.

    Raises:
        OSError: the object is gone or cannot be reached.
    """
    try:
        fs.invalidate_cache(path)
        info = fs.info(path)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a store client's error is a failed read
        raise OSError(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else exc}") from exc
    tag = "|".join(str(info.get(k)) for k in ("ETag", "etag", "VersionId", "md5Hash", "crc32c", "generation",
                                              "blob_id", "lfs"))
    modified = "|".join(str(info.get(k)) for k in ("LastModified", "mtime", "updated", "last_commit"))
    return int(info.get("size") or 0), modified, tag, tag

