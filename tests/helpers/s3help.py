"""Uploads to the moto S3 server of tests/unit/io/stores/conftest.py (``s3_server``'s environment)."""
from __future__ import annotations

from pathlib import Path


def client(env: dict[str, str]):  # noqa: ANN201 - a boto3 client (boto3 has no type stubs here)
    """A boto3 S3 client of the moto server whose environment is ``env`` (``s3_server``), given
    explicitly: ``os.environ`` holds it only inside a test that asks for ``s3_endpoint``."""
    import boto3

    return boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], aws_session_token=env["AWS_SESSION_TOKEN"],
                        region_name=env["AWS_DEFAULT_REGION"])


def upload(env: dict[str, str], bucket: str, src: Path, prefix: str) -> list[str]:
    """Every file under ``src`` put into ``bucket`` (created when missing) under ``prefix``, in one
    part each (the ETag is the MD5), by :func:`client`; the keys written."""
    s3 = client(env)
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=bucket)
    keys = []
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        key = f"{prefix}/{f.relative_to(src).as_posix()}"
        s3.put_object(Bucket=bucket, Key=key, Body=f.read_bytes())
        keys.append(key)
    return keys
