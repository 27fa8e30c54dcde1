"""``python -m sweep``: the ``sweep`` command."""

from .cli import main

main()
