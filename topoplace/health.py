"""Liveness, readiness and Prometheus metrics over HTTP, one small server per service.

The port is reachable by anything the NetworkPolicy lets in, so `/readyz` says
ready or not and nothing else: why a service is not ready (a broker address, an
exception's text) goes to the log, once per change of reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import prometheus_client
from aiohttp import web

log = logging.getLogger(__name__)

READY_BODY = "ready\n"
NOT_READY_BODY = "not ready\n"


class HealthServer:
    """GET /healthz (200 while the event loop serves), /readyz (200 if ready() else 503), /metrics.

    `reason` says why the service is not ready; it is logged (`health.not_ready`), never served.
    """

    def __init__(
        self,
        port: int,
        *,
        ready: Callable[[], bool],
        reason: Callable[[], str | None] | None = None,  # why it is not ready, for the log
        host: str = "0.0.0.0",  # probes come from the kubelet, not from localhost
        registry: prometheus_client.CollectorRegistry = prometheus_client.REGISTRY,
    ) -> None:
        self.port = port
        self.host = host
        self.ready = ready
        self.reason = reason
        self.registry = registry
        self._runner: web.AppRunner | None = None
        self._logged_reason: str | None = None  # the last reason logged: a probe every 5 s logs a change only

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
        except Exception as exc:  # noqa: BLE001 - a failing check means "not ready"; the reason is logged
            self._log_not_ready(f"readiness check failed: {type(exc).__name__}: {exc}")
            return web.Response(status=503, text=NOT_READY_BODY)
        if ready:
            self._logged_reason = None
            return web.Response(text=READY_BODY)
        why = self.reason() if self.reason is not None else None
        self._log_not_ready(why or "not ready")
        return web.Response(status=503, text=NOT_READY_BODY)

    def _log_not_ready(self, reason: str) -> None:
        if reason != self._logged_reason:
            self._logged_reason = reason
            log.info("health.not_ready", extra={"fields": {"reason": reason}})

    async def _metrics(self, request: web.Request) -> web.Response:
        body = prometheus_client.generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST})
