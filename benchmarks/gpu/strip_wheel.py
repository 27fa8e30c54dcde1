"""Copy a wheel without the files under some folders, with its RECORD rewritten to match.

    python benchmarks/gpu/strip_wheel.py IN.whl OUT.whl ray/jars/

Used for Ray, whose wheel carries ~31 MB of Java jars (``ray/jars/``) that a Python-only
cluster never loads. Every other member is copied byte for byte (same compression); RECORD
keeps the lines of the members kept, so ``pip install`` of the copy verifies and records
exactly what is in it. The file name stays the wheel's own (pip reads the name and version
from it).
"""

from __future__ import annotations

import csv
import io
import sys
import zipfile


def strip_wheel(src: str, dst: str, prefixes: list[str]) -> tuple[int, int]:
    """Write ``dst``: ``src`` less the members under ``prefixes``. Returns (members dropped, bytes dropped)."""
    dropped, dropped_bytes = 0, 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        # the wheel's own RECORD is at the top level (vendored packages have theirs deeper)
        record = next(n for n in zin.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD"))
        for info in zin.infolist():
            if info.filename == record:
                continue
            if any(info.filename.startswith(p) for p in prefixes):
                dropped += 1
                dropped_bytes += info.compress_size
                continue
            zout.writestr(info, zin.read(info), compress_type=info.compress_type)
        rows = [
            row
            for row in csv.reader(io.StringIO(zin.read(record).decode()))
            if row and not any(row[0].startswith(p) for p in prefixes)
        ]
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(rows)
        zout.writestr(zin.getinfo(record), text.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    if not dropped:
        raise SystemExit(f"strip_wheel: nothing under {prefixes} in {src}; is this the right wheel?")
    return dropped, dropped_bytes


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    n, size = strip_wheel(sys.argv[1], sys.argv[2], sys.argv[3:])
    print(f"strip_wheel: dropped {n} files ({size / 2**20:.1f} MiB compressed) under {' '.join(sys.argv[3:])}")
