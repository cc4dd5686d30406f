"""A client pointed at the test server by URL, and the object bodies the API tests create."""

from __future__ import annotations

import json
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

# kubernetes-asyncio's type stubs want model objects; the tests send plain dicts and
# `_content_type`, as its users do, so the API objects are typed loosely here.
CoreApi = Any
CustomApi = Any


def pod_body(
    name: str = "", *, scheduler: str = "topoplace", labels: dict[str, str] | None = None, **spec: object
) -> dict[str, Any]:
    meta: dict[str, object] = {"name": name} if name else {"generateName": "pod-"}
    if labels:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": scheduler, "containers": [{"name": "main", "image": "busybox"}], **spec},
    }


def status_of(err: ApiException) -> dict[str, Any]:
    """The Status object the server answered with."""
    body: dict[str, Any] = json.loads(err.body or b"{}")
    return body
