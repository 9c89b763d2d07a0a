"""An object-store or http(s) endpoint that cannot be reached (a port nothing listens on) is named as
such: the endpoint, the client's reason and what to do, never "no such object" (fsspec's http://
filesystem answers a refused connection with FileNotFoundError and an empty listing). A reached server
that answers 404 still says the object is missing. The port is one the OS handed out and that was
then closed, so nothing listens on it."""
from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator

import pytest

from datacheck.formats.discovery import discover
from datacheck.io.shardbytes import store_reason
from datacheck.io.stores import connection_error, unreachable_message
from datacheck.model.errors import UsageError

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")


def _closed_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on: bound by the OS, then closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture()
def http_server(tmp_path) -> Iterator[str]:
    """A live http server of ``tmp_path`` on 127.0.0.1 (its base URL)."""
    handler = type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(tmp_path)))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("tail", ["data/a.jsonl", "data/", "data/*.jsonl"])
def test_unreachable_http_endpoint_is_named_not_a_missing_object(scheme, tail):
    port = _closed_port()
    url = f"{scheme}://127.0.0.1:{port}/{tail}"
    with pytest.raises(UsageError) as err:
        discover([url], "auto")
    msg = str(err.value)
    assert f"the endpoint {scheme}://127.0.0.1:{port} could not be reached" in msg
    assert "no such object" not in msg and "start the server" in msg


def test_localhost_names_the_host_the_url_gives():
    port = _closed_port()
    with pytest.raises(UsageError, match=f"the endpoint http://localhost:{port} could not be reached"):
        discover([f"http://localhost:{port}/a.jsonl"], "auto")


def test_a_reached_server_without_the_object_still_says_no_such_object(http_server):
    with pytest.raises(UsageError, match="no such object or prefix") as err:
        discover([f"{http_server}/missing.jsonl"], "auto")
    assert "could not be reached" not in str(err.value)


def test_unreachable_s3_endpoint_is_named(monkeypatch):
    pytest.importorskip("s3fs")
    port = _closed_port()
    for k, v in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "x",
                 "AWS_SECRET_ACCESS_KEY": "y", "AWS_DEFAULT_REGION": "us-east-1",
                 "DATACHECK_STORE_RETRIES": "1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with pytest.raises(UsageError, match=f"the endpoint http://127.0.0.1:{port} could not be reached"):
        discover(["s3://bucket/a.jsonl"], "auto")


def test_read_errors_name_the_endpoint_through_wrapping():
    refused = ConnectionRefusedError(111, "Connection refused")
    try:
        try:
            raise refused
        except OSError as inner:
            raise FileNotFoundError("http://127.0.0.1:1/a.jsonl") from inner
    except FileNotFoundError as exc:
        wrapped = exc
    assert connection_error(wrapped) is refused
    reason = store_reason("http://127.0.0.1:1/a.jsonl", wrapped)
    assert "the endpoint http://127.0.0.1:1 could not be reached" in reason
    missing = FileNotFoundError("http://127.0.0.1:1/a.jsonl")
    assert connection_error(missing) is None and unreachable_message("http://h/a", missing) is None
    assert "could not be reached" not in store_reason("http://127.0.0.1:1/a.jsonl", missing)
