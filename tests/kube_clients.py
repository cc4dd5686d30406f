"""A kubernetes-asyncio client pointed at a URL, as the services build one."""

from __future__ import annotations

from kubernetes_asyncio import client


def client_for(url: str) -> client.ApiClient:
    # The process-default Configuration must skip client-side validation, or the
    # pods/binding reply fails to deserialize (the models are built with the default).
    config = client.Configuration(host=url)
    config.client_side_validation = False
    client.Configuration.set_default(config)
    return client.ApiClient(config)
