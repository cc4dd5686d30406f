"""Liveness, readiness and Prometheus metrics over HTTP, one small server per service."""

from __future__ import annotations

from collections.abc import Callable

import prometheus_client
from aiohttp import web


class HealthServer:
    """GET /healthz (200 while the event loop serves), /readyz (200 if ready() else 503), /metrics."""

    def __init__(
        self,
        port: int,
        *,
        ready: Callable[[], bool],
        reason: Callable[[], str | None] | None = None,  # why it is not ready, for /readyz
        host: str = "0.0.0.0",  # probes come from the kubelet, not from localhost
        registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
    ) -> None:
        self.port = port
        self.host = host
        self.ready = ready
        self.reason = reason
        self.registry = registry
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self.port = int(address[1])
        return self.port

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        try:
            ready = self.ready()
        except Exception as exc:  # noqa: BLE001 - a failing check means "not ready", with the reason
            return web.Response(status=503, text=f"not ready: {type(exc).__name__}: {exc}\n")
        if ready:
            return web.Response(text="ready\n")
        why = self.reason() if self.reason is not None else None
        return web.Response(status=503, text=f"not ready: {why}\n" if why else "not ready\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = prometheus_client.generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
