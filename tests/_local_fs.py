"""pyarrow filesystems over the local disk for tests and benchmarks: :class:`LocalHandler`
passes everything to ``LocalFileSystem``; subclasses change one thing, such as counting the
bytes read from each file (:func:`counting_filesystem`) or failing some writes.

```python
fs, counter = counting_filesystem()
table = pq.read_table("/tmp/x.parquet", filesystem=fs)
counter.total(), counter.by_file()      # bytes read, {path: [opens, bytes]}
```
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.fs as pafs


class LocalHandler(pafs.FileSystemHandler):
    """``LocalFileSystem`` as a Python handler (wrap it with ``pafs.PyFileSystem``)."""

    def __init__(self):
        self.local = pafs.LocalFileSystem()

    def get_type_name(self):
        return f"local-{type(self).__name__}"

    def normalize_path(self, path):
        return path

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.local.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("refusing to delete the root")

    def delete_file(self, path):
        self.local.delete_file(path)

    def move(self, src, dest):
        self.local.move(src, dest)

    def copy_file(self, src, dest):
        self.local.copy_file(src, dest)

    def open_input_stream(self, path):
        return self.local.open_input_stream(path)

    def open_input_file(self, path):
        return self.local.open_input_file(path)

    def open_output_stream(self, path, metadata):
        return self.local.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path, metadata):
        return self.local.open_append_stream(path, metadata=metadata)


class Counter:
    def __init__(self):
        self.files: dict[str, list[int]] = {}

    def reset(self) -> None:
        self.files.clear()

    def opened(self, path: str) -> None:
        self.files.setdefault(path, [0, 0])[0] += 1

    def read(self, path: str, n: int) -> None:
        self.files.setdefault(path, [0, 0])[1] += n

    def total(self) -> int:
        return sum(b for _, b in self.files.values())

    def by_file(self) -> dict[str, list[int]]:
        return dict(self.files)


class _CountingFile(io.FileIO):
    """A local file for ``pa.PythonFile`` that reports every byte read."""

    def __init__(self, path: str, counter: Counter):
        super().__init__(path, "rb")
        self._path, self._counter = path, counter
        counter.opened(path)

    def read(self, n: int = -1) -> bytes:
        data = super().read(n)
        self._counter.read(self._path, len(data))
        return data

    def readinto(self, buffer) -> int:
        n = super().readinto(buffer)
        self._counter.read(self._path, n or 0)
        return n


class CountingHandler(LocalHandler):
    """Local files read through Python, every byte counted."""

    def __init__(self, counter: Counter):
        super().__init__()
        self.counter = counter

    def __eq__(self, other):
        return isinstance(other, CountingHandler) and other.counter is self.counter

    def __ne__(self, other):
        return not self == other

    def open_input_stream(self, path):
        return pa.PythonFile(_CountingFile(path, self.counter), mode="r")

    def open_input_file(self, path):
        return pa.PythonFile(_CountingFile(path, self.counter), mode="r")


def counting_filesystem() -> tuple[pafs.PyFileSystem, Counter]:
    counter = Counter()
    return pafs.PyFileSystem(CountingHandler(counter)), counter
