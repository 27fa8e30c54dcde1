"""A SIGTERM to the driver taken as a Ctrl-C while a sweep runs (``sweep._interrupt``),
unit-tested without Ray: the handler taken back from the one ``ray.init`` installs, nothing changed
outside the main thread or after the block, and the driver ending at once when the Ray it started
lost its raylet or GCS (the runs themselves: test_loop.py, and test_run_terminal.py's slow tests)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from sweep._interrupt import LOST_POLL_S, SigtermAsCtrlC, local_ray_lost, starting_ray


def _ray_like(signum, frame):  # what ray.init installs: SystemExit
    raise SystemExit(signum)


def test_a_sigterm_is_a_ctrl_c_inside_and_after_ray_init_and_the_handler_of_before_comes_back():
    before = signal.getsignal(signal.SIGTERM)
    try:
        with SigtermAsCtrlC("unused") as sigterm:
            with pytest.raises(KeyboardInterrupt), starting_ray():  # ray.init, inside the run
                signal.signal(signal.SIGTERM, _ray_like)  # first thing
                signal.raise_signal(signal.SIGTERM)  # before it returns: Ray's handler, a Ctrl-C still
            assert sigterm.received
            with pytest.raises(KeyboardInterrupt) as raised:
                signal.raise_signal(signal.SIGTERM)  # after it: taken back
            assert raised.value.signal == signal.SIGTERM  # pyright: ignore[reportAttributeAccessIssue]  (the CLI exits 143)
        assert signal.getsignal(signal.SIGTERM) is _ray_like  # Ray's, as Ray started inside: it shuts Ray down
        with pytest.raises(SystemExit), starting_ray():  # no run open: Ray's handler as Ray has it
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is _ray_like
    finally:
        signal.signal(signal.SIGTERM, before)
    with SigtermAsCtrlC("unused"):
        pass
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_sigterm_whose_interrupt_python_swallowed_is_raised_again_until_the_run_catches_one():
    """A SIGTERM handled inside a garbage-collection callback or a ``__del__`` (JAX's, while it
    compiles) raises there, and Python ignores it ("Exception ignored in"): it must not be lost."""

    class Finalised:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))  # the handler runs here: its KeyboardInterrupt is ignored

    before = signal.getsignal(signal.SIGTERM), sys.unraisablehook
    with SigtermAsCtrlC("unused"):
        finalised = Finalised()
        with pytest.raises(KeyboardInterrupt):
            del finalised
            time.sleep(30)  # raised again here, at the watchdog's next look
    assert (signal.getsignal(signal.SIGTERM), sys.unraisablehook) == before


def test_a_stop_that_takes_its_time_is_not_interrupted_again():
    """One SIGTERM is one Ctrl-C: the stop it starts (checkpoints, aggregation) runs to its end."""
    with SigtermAsCtrlC("unused") as sigterm:
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            time.sleep(3 * LOST_POLL_S + 0.5)  # the stop: the watchdog looks several times meanwhile
        assert sigterm.received


def test_nothing_changes_outside_the_main_thread():
    before, seen = signal.getsignal(signal.SIGTERM), []

    def run():
        with SigtermAsCtrlC("unused") as sigterm:
            sigterm.take_back()
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [before] and signal.getsignal(signal.SIGTERM) is before


def test_only_a_lost_raylet_or_gcs_counts(monkeypatch):
    """A dashboard that died long before (Ray lives on without it) must not end a graceful stop."""
    from ray._private import worker

    class Node:
        def __init__(self, dead):
            self.dead = dead

        def dead_processes(self):
            return [(kind, None) for kind in self.dead]

        all_processes = {"raylet": [], "gcs_server": []}
        gcs_address = "127.0.0.1:1"  # (nothing listens: refused)

    for dead, lost in (([], False), (["dashboard", "log_monitor"], False), (["raylet"], True), (["gcs_server"], True)):
        monkeypatch.setattr(worker, "_global_node", Node(dead))
        assert local_ray_lost() is lost, dead
    monkeypatch.setattr(worker, "_global_node", None)  # no Ray
    assert local_ray_lost() is False


def test_after_a_sigterm_a_gcs_that_refuses_connections_is_lost(monkeypatch):
    """A SIGTERM closes the GCS's port at once, while its process and the raylet's live on for
    seconds (and the driver's Ray may end the driver with status 1 meanwhile): once a SIGTERM came,
    a refusal counts. Only for a GCS this process started, and only a refusal (not a slow answer)."""
    from ray._private import worker

    listening = socket.create_server(("127.0.0.1", 0))
    closed = socket.socket()  # bound, not listening: its port refuses, and no other process takes it
    closed.bind(("127.0.0.1", 0))
    addresses = {s: f"127.0.0.1:{s.getsockname()[1]}" for s in (listening, closed)}

    class Node:
        def __init__(self, address, started_gcs=True):
            self.gcs_address = address
            self.all_processes = {"raylet": [], **({"gcs_server": []} if started_gcs else {})}

        def dead_processes(self):
            return []

    with listening, closed:
        for node, signalled, lost in (
            (Node(addresses[closed]), True, True),
            (Node(addresses[closed]), False, False),  # no SIGTERM yet: only a daemon's exit counts
            (Node(addresses[listening]), True, False),
            (Node(addresses[closed], started_gcs=False), True, False),  # a cluster's GCS: not this driver's to judge
        ):
            monkeypatch.setattr(worker, "_global_node", node)
            assert local_ray_lost(signalled=signalled) is lost, (node.gcs_address, node.all_processes, signalled)
    tried = []

    def refused(address, timeout):
        tried.append(address)
        raise ConnectionRefusedError

    monkeypatch.setattr(socket, "create_connection", refused)
    monkeypatch.setattr(worker, "_global_node", Node("[::1]:6379"))  # Ray's form of an IPv6 address
    assert local_ray_lost(signalled=True) and tried == [("::1", 6379)]


@pytest.mark.parametrize("on_ray", [True, False])
def test_the_driver_ends_at_once_saying_how_to_resume_when_its_ray_got_the_sigterm_too(on_ray):
    """Only a run that depends on this process's Ray (it started or reused it: ``starting_ray``)
    ends at once; an in-process run beside a Ray started otherwise stops as after a Ctrl-C."""
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from sweep import _interrupt

        _interrupt.local_ray_lost = lambda signalled: signalled  # the GCS ended with the driver's SIGTERM
        with _interrupt.SigtermAsCtrlC("stopped; resume with: sweep run x.toml --resume") as sigterm:
            sigterm.closes(lambda: print("display closed", flush=True))
            sigterm.closes(lambda: 1 / 0)  # a close that fails does not stop the end
            sigterm.closes(lambda: time.sleep(60))  # nor does one that hangs
            if {on_ray}:
                with _interrupt.starting_ray():
                    pass
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)
            except KeyboardInterrupt:  # the graceful stop, which would wait on the dead Ray
                time.sleep(3)
        print("stopped gracefully", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=50)
    if on_ray:
        assert out.returncode == 143, out.stderr
        assert out.stdout == "display closed\n"
        assert out.stderr.strip().splitlines()[-1] == "stopped; resume with: sweep run x.toml --resume"
    else:
        assert (out.returncode, out.stdout) == (0, "stopped gracefully\n"), out.stderr


@pytest.mark.parametrize("files_open", [0, 1100])
def test_a_sigterm_is_heard_while_the_main_thread_runs_no_python(files_open):
    """The main thread inside a long call into C (inside Ray, waiting) runs no Python handler until
    it returns, and the driver's Ray may end the process first: the watchdog hears the SIGTERM
    itself (``signal.set_wakeup_fd``) and ends the process while the call still runs; also with
    more than 1024 files open (``ray.init`` raises the limit; a second run in a notebook)."""
    script = textwrap.dedent(
        f"""
        import hashlib, os, resource, signal, threading
        from sweep import _interrupt

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range({files_open})]  # the watchdog's files are numbered above them

        _interrupt.local_ray_lost = lambda signalled: signalled  # the GCS ended with the driver's SIGTERM
        with _interrupt.SigtermAsCtrlC("stopped; resume with: sweep run x.toml --resume"):
            with _interrupt.starting_ray():
                pass
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
            hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 50_000_000)  # (in C, without the GIL: seconds)
            print("the call returned", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout) == (143, ""), out.stderr
    assert out.stderr.strip().splitlines()[-1] == "stopped; resume with: sweep run x.toml --resume"
