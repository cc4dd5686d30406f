"""The kubeapi tests' CoreV1Api on the shared client (tests/conftest.py starts the server)."""

from __future__ import annotations

import pytest
from kubeapi_support import CoreApi, CustomApi
from kubernetes_asyncio import client


@pytest.fixture
def core(kube_client: client.ApiClient) -> CoreApi:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def dra(kube_client: client.ApiClient) -> CustomApi:
    return client.ResourceV1Api(kube_client)


@pytest.fixture
def custom(kube_client: client.ApiClient) -> CustomApi:
    return client.CustomObjectsApi(kube_client)
