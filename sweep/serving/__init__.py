"""Serve a seed ensemble over HTTP on Ray Serve (``sweep.serve``, ``sweep serve``).

The package is named ``serving`` so that no import of it can shadow the function ``sweep.serve``.
Ray-only (the ``seed-sweep[serve]`` extra: Ray Serve, FastAPI); no core module imports it.
"""

from ._options import ServeOptions as ServeOptions
from ._service import Service as Service
from ._service import serve as serve
