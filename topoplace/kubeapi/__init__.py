"""A small Kubernetes API server (core/v1 nodes, pods, pods/binding, events; Volcano HyperNodes)
for tests and demos, speaking what kubernetes-asyncio sends. See docs/kube-api.md."""

from topoplace.kubeapi.errors import ApiError
from topoplace.kubeapi.resources import ResourceType
from topoplace.kubeapi.selectors import Selector, parse_selector
from topoplace.kubeapi.server import KubeApiServer
from topoplace.kubeapi.store import Change, ObjectStore

__all__ = ["ApiError", "Change", "KubeApiServer", "ObjectStore", "ResourceType", "Selector", "parse_selector"]
