"""The ``sweep`` command (``sweep = "sweep.cli:main"``; also ``python -m sweep``)."""

from ._app import app as app
from ._app import main as main
from ._args import cli_phrasing as cli_phrasing
from ._args import parse_where as parse_where
