"""Bytes fetched from an object store by ``datacheck audit s3://...``: a cache miss and a cache hit, for
an object uploaded in one part (its ETag is the MD5 of the bytes: the content hash without reading)
and for a multipart upload (its ETag is not a content hash: the bytes are hashed streaming).

Runs against a moto S3 server on 127.0.0.1 (dev extra), counting the ``GetObject`` / ``HeadObject``
requests s3fs makes and the bytes the GETs return. Usage::

    python benchmarks/bench_store_reads.py [--rows 20000]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20000, help="rows of the generated shard (128 token ids + 200 B text)")
    args = ap.parse_args()
    import logging

    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=f"http://{host}:{port}")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    import boto3
    import numpy as np
    import polars as pl
    import s3fs.core as core

    import datacheck

    rng = np.random.default_rng(0)
    df = pl.DataFrame({"input_ids": rng.integers(0, 50000, (args.rows, 128)).tolist(),
                       "source": [bytes(rng.integers(0, 256, 100, dtype=np.uint8)).hex() for _ in range(args.rows)]})
    tmp = tempfile.mkdtemp(prefix="bench-store-")
    path = os.path.join(tmp, "s.parquet")
    df.write_parquet(path, row_group_size=5000)
    size = os.path.getsize(path)
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="bench")
    with open(path, "rb") as f:
        s3.put_object(Bucket="bench", Key="single/s.parquet", Body=f.read())
    s3.upload_file(path, "bench", "multi/s.parquet",
                   Config=boto3.s3.transfer.TransferConfig(multipart_threshold=1 << 20, multipart_chunksize=5 << 20))
    real = core.S3FileSystem._call_s3
    count = {"get": 0, "bytes": 0, "head": 0}

    async def counting(self, method, *a, **kw):
        out = await real(self, method, *a, **kw)
        if method == "get_object":
            count["get"] += 1
            count["bytes"] += int(out.get("ContentLength") or 0)
        elif method == "head_object":
            count["head"] += 1
        return out

    core.S3FileSystem._call_s3 = counting
    print(f"shard: {args.rows} rows, {size} bytes")
    print(f"{'upload':<10}{'run':<6}{'GET':>5}{'bytes read':>12}{'x file':>8}{'HEAD':>6}{'seconds':>9}  content hash")
    for upload in ("single", "multi"):
        cache = os.path.join(tmp, f"cache-{upload}")
        for run in ("miss", "hit"):
            for k in count:
                count[k] = 0
            t = time.perf_counter()
            rep = datacheck.audit(f"s3://bench/{upload}", cache_dir=cache, workers=1, config_path=None)
            dt = time.perf_counter() - t
            chash = rep.to_dict()["shards"][0]["content_hash"]
            print(f"{upload:<10}{run:<6}{count['get']:>5}{count['bytes']:>12}{count['bytes'] / size:>8.2f}"
                  f"{count['head']:>6}{dt:>9.2f}  {chash.split(':')[0]}")
    server.stop()


if __name__ == "__main__":
    main()
