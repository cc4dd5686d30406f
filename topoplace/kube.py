"""A kubernetes-asyncio client configured from Settings."""

from __future__ import annotations

from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration

from topoplace.config import KUBE_API_URL, KUBECONFIG, ConfigError, Settings


async def api_client(settings: Settings) -> ApiClient:
    """A client for the API server named by the settings.

    Order: TOPOPLACE_KUBE_API_URL (a plain URL, no auth), then KUBECONFIG, then
    the in-cluster service account.
    """
    configuration = await _configuration(settings)
    # kubernetes-asyncio builds reply models with the *process default*
    # Configuration, and with validation on it fails on the pods/binding reply
    # (target is None) after the server already bound the pod. Turning it off
    # only works on the default, so the default is replaced here.
    configuration.client_side_validation = False
    Configuration.set_default(configuration)
    return ApiClient(configuration=configuration)


async def _configuration(settings: Settings) -> Configuration:
    if settings.kube_api_url:
        return Configuration(host=settings.kube_api_url.rstrip("/"))
    configuration = Configuration()
    if settings.kubeconfig:
        try:
            await kube_config.load_kube_config(
                config_file=settings.kubeconfig, client_configuration=configuration, persist_config=False
            )
        except (kube_config.ConfigException, OSError, ValueError) as exc:
            raise ConfigError(KUBECONFIG, f"cannot load {settings.kubeconfig!r}: {exc}") from exc
        return configuration
    try:
        kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except kube_config.ConfigException as exc:
        raise ConfigError(
            KUBE_API_URL, f"neither it nor {KUBECONFIG} is set, and this is not a pod in a cluster ({exc})"
        ) from exc
    return configuration
