"""A moto S3 server on 127.0.0.1 that pyarrow's S3 client can talk to (tests and benchmarks).

moto 5.2.1 names the CompleteMultipartUpload root element wrongly (getmoto/moto#10055), which
pyarrow's S3 client rejects (and retries); :func:`fixed_multipart_upload` puts the name S3 uses
back while a server runs in this process.

```python
with moto_server() as (host, port):
    fs = s3_filesystem(host, port)
```
``python tests/_moto.py PORT`` serves in its own process (prints ``READY``) until killed;
:func:`counting_requests` counts the object requests a server in this process answers.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

import pyarrow.fs as pafs


@contextlib.contextmanager
def fixed_multipart_upload() -> Iterator[None]:
    from moto.s3 import responses

    serialized = responses.S3Response.serialized

    def fixed(self, result):
        status, headers, body = serialized(self, result)
        if self.data.get("Action") == "CompleteMultipartUpload" and isinstance(body, (str, bytes)):
            old, new = "CompleteMultipartUploadResponse", "CompleteMultipartUploadResult"
            body = body.replace(old, new) if isinstance(body, str) else body.replace(old.encode(), new.encode())
        return status, headers, body

    responses.S3Response.serialized = fixed
    try:
        yield
    finally:
        responses.S3Response.serialized = serialized


@contextlib.contextmanager
def counting_requests() -> Iterator[dict[str, int]]:
    """``{"GET": n, "HEAD": n}``: the object GETs (ranged or not) and HEADs answered while inside."""
    from moto.s3 import responses

    counts = {"GET": 0, "HEAD": 0}
    get_object, head_object = responses.S3Response.get_object, responses.S3Response.head_object

    def counted_get(self, *args, **kwargs):
        counts["GET"] += 1
        return get_object(self, *args, **kwargs)

    def counted_head(self, *args, **kwargs):
        counts["HEAD"] += 1
        return head_object(self, *args, **kwargs)

    responses.S3Response.get_object, responses.S3Response.head_object = counted_get, counted_head
    try:
        yield counts
    finally:
        responses.S3Response.get_object, responses.S3Response.head_object = get_object, head_object


@contextlib.contextmanager
def moto_server(port: int = 0) -> Iterator[tuple[str, int]]:
    """A threaded moto server in this process: ``(host, port)``."""
    from moto.server import ThreadedMotoServer

    with fixed_multipart_upload():
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            yield server.get_host_and_port()
        finally:
            server.stop()


def s3_filesystem(host: str, port: int) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        endpoint_override=f"{host}:{port}",
        scheme="http",
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        allow_bucket_creation=True,
    )


if __name__ == "__main__":
    with moto_server(int(sys.argv[1])):
        print("READY", flush=True)
        while True:
            time.sleep(3600)
