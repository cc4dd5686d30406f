"""Child processes of the demo: each service runs as its own `topoplace` process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from topoplace.config import DECISION_KEY, DECISION_KEY_FILE


class ServiceProcess(msgspec.Struct, kw_only=True):
    name: str
    argv: tuple[str, ...]
    log_path: Path
    process: asyncio.subprocess.Process | None = None


def with_run_key(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with a random key of this run's seal (schemas/seal.py), for every service it starts."""
    keyed = {k: v for k, v in env.items() if k != DECISION_KEY_FILE}
    keyed[DECISION_KEY] = secrets.token_hex(32)
    return keyed


def topoplace_argv(*args: str) -> tuple[str, ...]:
    # The running interpreter, so the children use the same environment as the demo.
    return (sys.executable, "-m", "topoplace.cli", *args)


async def start(
    name: str, args: Sequence[str], *, env: Mapping[str, str], log_dir: Path, first_line: bool = False
) -> tuple[ServiceProcess, str]:
    """Start a child; with first_line, return the first line it prints on stdout (e.g. its URL)."""
    log_path = log_dir / f"{name}.log"
    log = log_path.open("ab")
    argv = topoplace_argv(*args)
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=dict(env),
        stdout=asyncio.subprocess.PIPE if first_line else log,
        stderr=log,
        start_new_session=True,  # its own process group: a stop reaches its children too
    )
    log.close()
    line = ""
    if first_line:
        assert process.stdout is not None
        raw = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        if not raw:
            raise RuntimeError(f"{name} exited before printing its address; see {log_path}")
        line = raw.decode().strip()
        asyncio.get_running_loop().create_task(_drain(process.stdout, log_path))
    return ServiceProcess(name=name, argv=argv, log_path=log_path, process=process), line


async def _drain(stream: asyncio.StreamReader, log_path: Path) -> None:
    with log_path.open("ab") as log:
        while chunk := await stream.read(65536):
            log.write(chunk)


async def stop(service: ServiceProcess, *, grace_seconds: float = 10.0) -> int | None:
    """SIGTERM the child's group, then SIGKILL it if it has not exited within the grace period."""
    process = service.process
    if process is None or process.returncode is not None:
        return None if process is None else process.returncode
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return process.returncode
    try:
        return await asyncio.wait_for(process.wait(), timeout=grace_seconds)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return await process.wait()


def exited(services: Sequence[ServiceProcess]) -> list[ServiceProcess]:
    return [s for s in services if s.process is not None and s.process.returncode is not None]
