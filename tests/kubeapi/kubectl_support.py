"""Running the kubectl found on PATH against a test API server: a kubeconfig of its own naming the
server over plain HTTP, and a discovery cache of its own (so no other server's cache is read)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import msgspec
import pytest

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="no kubectl on PATH")


class Result(msgspec.Struct):
    code: int
    out: str
    err: str


class Kubectl:
    """kubectl with `--kubeconfig` and `--cache-dir` set; run in a subprocess so the server's event
    loop (the test's own) keeps serving while it waits."""

    def __init__(self, url: str, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self.config = home / "kubeconfig"
        self.config.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters: [{{name: test, cluster: {{server: '{url}'}}}}]\n"
            "users: [{name: test, user: {}}]\n"
            "contexts: [{name: test, context: {cluster: test, user: test, namespace: default}}]\n"
            "current-context: test\n"
        )
        self.cache = home / "cache"

    def args(self, *args: str) -> list[str]:
        assert KUBECTL is not None
        return [KUBECTL, "--kubeconfig", str(self.config), "--cache-dir", str(self.cache), *args]

    async def start(self, *args: str, stdin: bool = False) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *self.args(*args),
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def __call__(self, *args: str, stdin: str = "", timeout: float = 60) -> Result:
        proc = await self.start(*args, stdin=bool(stdin))
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), timeout)
        assert proc.returncode is not None
        return Result(proc.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str = "") -> str:
        result = await self(*args, stdin=stdin)
        assert result.code == 0, f"kubectl {' '.join(args)}: {result.err}"
        return result.out


async def read_until(stream: asyncio.StreamReader | None, needle: str, timeout: float = 30) -> list[str]:
    """Lines of `stream` up to and including the first containing `needle`."""
    assert stream is not None
    lines: list[str] = []
    while True:
        line = (await asyncio.wait_for(stream.readline(), timeout)).decode()
        if not line:
            raise AssertionError(f"stream ended before {needle!r}; got {lines}")
        lines.append(line)
        if needle in line:
            return lines


def rows(table: str) -> dict[str, dict[str, str]]:
    """kubectl's printed table by its NAME column: each row's cells by column title."""
    lines = [line for line in table.splitlines() if line.strip()]
    header = lines[0]
    starts = [
        i for i, ch in enumerate(header) if ch != " " and (i == 0 or header[i - 1] == " " and header[i - 2] == " ")
    ]
    titles = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    found: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        cells = dict(
            zip(titles, [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)], strict=True)
        )
        found[cells["NAME"]] = cells
    return found
