"""The tests' moto S3 server (``tests/_moto.py``: one place for its fix) in a process of its own,
so that its CPU time is not the benchmark's.

```python
with moto_process() as (port, filesystem):  # a pyarrow S3FileSystem on 127.0.0.1:port
    ...
```
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator

import pyarrow.fs as pafs

from benchmarks._shared.repo import ROOT, tests_module

MOTO = str(ROOT / "tests" / "_moto.py")


@contextlib.contextmanager
def moto_process() -> Iterator[tuple[int, pafs.S3FileSystem]]:
    """``(port, filesystem)`` of a moto server started for the block and killed after it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, MOTO, str(port)], stdout=subprocess.PIPE, text=True, stderr=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # moto prints a line of its own first
            if "READY" in line:
                break
        else:
            sys.exit("moto server did not start")
        yield port, tests_module("_moto").s3_filesystem("127.0.0.1", port)
    finally:
        proc.kill()
        proc.wait()
