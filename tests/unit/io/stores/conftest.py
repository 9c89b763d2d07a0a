"""A moto S3 server on 127.0.0.1 for the object-store tests (one per session, on a free port).

The endpoint reaches s3fs the way users point it at any S3-compatible server: botocore's
``AWS_ENDPOINT_URL`` environment variable (botocore >= 1.31), with dummy credentials. The variables are
set for the session only while the fixture is in use (and restored after), so no other test sees them.
"""
from __future__ import annotations

import os
from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:<port>`` of a running moto server; skipped with the reason when moto or s3fs
    is missing (both are in the dev extra, so CI runs these tests)."""
    pytest.importorskip("s3fs", reason="s3fs is not installed (the datacheck[s3] extra)")
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed (dev extra)")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env["AWS_ENDPOINT_URL"]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()
