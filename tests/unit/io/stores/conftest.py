"""A moto S3 server on 127.0.0.1 for the object-store tests (one per session, on a free port).

The endpoint reaches s3fs the way users point it at any S3-compatible server: botocore's
``AWS_ENDPOINT_URL`` environment variable (botocore >= 1.31), with dummy credentials. The server runs
for the whole session (:func:`s3_server`); the variables are set only for the test that asks for
:func:`s3_endpoint` (``monkeypatch``: undone after it), so no other test, and no later test of the same
worker, sees them.
"""
from __future__ import annotations

from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, str]]:
    """The environment that points botocore at a running moto server (``AWS_ENDPOINT_URL``
    ``http://127.0.0.1:<port>``, dummy credentials, region); nothing is set in ``os.environ`` here.
    Skipped with the reason when moto or s3fs is missing (both are in the dev extra, so CI runs these
    tests)."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (the datacheck[s3] extra)")
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed (dev extra)")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    finally:
        server.stop()


@pytest.fixture
def s3_endpoint(s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """``http://127.0.0.1:<port>`` of the moto server, its variables set in ``os.environ`` for this test
    only (worker processes the test starts inherit them)."""
    for key, value in s3_server.items():
        monkeypatch.setenv(key, value)
    return s3_server["AWS_ENDPOINT_URL"]
