"""Kubernetes API calls read raw: the 2xx body as bytes, any other status raised with its body.

The binder never needs kubernetes-asyncio's reply models, and building them costs most of
the client's CPU; every call is made with `_preload_content=False` and goes through here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from services.binder.kube_objects import status_message


def api_error_text(exc: ApiException) -> str:
    """The server's Status message when it sent one, else the HTTP reason."""
    body: object = exc.body
    if isinstance(body, str):
        body = body.encode()
    if isinstance(body, bytes) and body:
        return status_message(body, int(exc.status or 0))
    return f"HTTP {exc.status} {exc.reason or ''}".strip()


async def raw_call(call: Callable[[], Awaitable[Any]]) -> bytes:
    """Run a kubernetes-asyncio call made with `_preload_content=False`; the body of a 2xx reply.

    Any other status is raised as an ApiException carrying the body, as the client would.
    """
    reply = await call()
    try:
        body: bytes = await reply.read()
    finally:
        reply.release()
    if not 200 <= reply.status <= 299:
        exc = ApiException(status=reply.status, reason=reply.reason)
        exc.body = body
        raise exc
    return body
