"""Whether a Ray address answers: Ray itself retries a dead ``host:port`` for about a minute
before it says so; a sweep (``sweep run --address``) and a service (``sweep serve --address``)
check it first, in a few seconds."""

from __future__ import annotations

import socket

from ._errors import SweepError


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A :class:`SweepError` naming ``address`` (``host:port``) where nothing answers there;
    ``"auto"``, a name Ray resolves itself, is left to Ray."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise SweepError(
            f"`address`: nothing answers at {address} ({type(e).__name__}: {e}); start the cluster first "
            f"(`ray start --head` on its head node prints its address), or give that address"
        ) from None
