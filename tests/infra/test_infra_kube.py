"""api_client: URL, kubeconfig, and the process-default Configuration the binding reply needs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio.client import (
    ApiException,
    Configuration,
    CoreV1Api,
    V1Binding,
    V1ObjectMeta,
    V1ObjectReference,
)

from topoplace.config import ConfigError, Settings
from topoplace.kube import api_client


@pytest.fixture(autouse=True)
def restore_default_configuration() -> Iterator[None]:
    saved = Configuration.get_default_copy()
    yield
    Configuration.set_default(saved)


@pytest.fixture
async def api_server() -> AsyncIterator[str]:
    """Answers pods/binding the way the real API server does: 201 with a Status, not a Binding."""

    async def bind(request: web.Request) -> web.Response:
        if request.match_info["name"] == "gone":
            return web.json_response(
                {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404},
                status=404,
            )
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{namespace}/pods/{name}/binding", bind)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


def binding(pod: str) -> V1Binding:
    return V1Binding(
        metadata=V1ObjectMeta(name=pod, namespace="default"),
        target=V1ObjectReference(api_version="v1", kind="Node", name="node-a"),
    )


async def test_url_client_binds_without_tripping_on_the_status_reply(api_server: str) -> None:
    client = await api_client(Settings(kube_api_url=api_server + "/"))
    try:
        assert client.configuration.host == api_server
        assert Configuration.get_default_copy().client_side_validation is False
        core = CoreV1Api(client)
        await core.create_namespaced_pod_binding("trainer-0", "default", binding("trainer-0"))
        with pytest.raises(ApiException) as caught:
            await core.create_namespaced_pod_binding("gone", "default", binding("gone"))
        assert caught.value.status == 404
    finally:
        await client.close()


async def test_kubeconfig_client(api_server: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig.yaml"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {api_server}
users:
- name: tester
  user:
    token: secret-token
contexts:
- name: test
  context:
    cluster: test
    user: tester
current-context: test
"""
    )
    client = await api_client(Settings(kubeconfig=str(kubeconfig)))
    try:
        assert client.configuration.host == api_server
        await CoreV1Api(client).create_namespaced_pod_binding("trainer-1", "default", binding("trainer-1"))
    finally:
        await client.close()


async def test_unreadable_kubeconfig_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        await api_client(Settings(kubeconfig=str(tmp_path / "missing.yaml")))
    assert caught.value.variable == "KUBECONFIG"


async def test_no_way_to_reach_a_cluster_names_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    with pytest.raises(ConfigError) as caught:
        await api_client(Settings())
    assert caught.value.variable == "TOPOPLACE_KUBE_API_URL"
    assert "KUBECONFIG" in caught.value.reason
