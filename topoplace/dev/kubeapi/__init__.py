"""A small Kubernetes API server for tests and demos, speaking what kubernetes-asyncio sends: core/v1
nodes, pods, pods/binding, events; Volcano HyperNodes and PodGroups; Kueue Topologies; DRA
(resource.k8s.io/v1); PersistentVolumeClaims, PersistentVolumes, StorageClasses; finalizers, garbage
collection, the ResourceClaim controller, a volume provisioner, fault injection;
discovery, OpenAPI v3 and Tables, so kubectl works against it. See docs/kube-api.md."""

from topoplace.dev.kubeapi.changes import Change
from topoplace.dev.kubeapi.errors import ApiError
from topoplace.dev.kubeapi.faults import FaultPlan, FaultReport
from topoplace.dev.kubeapi.resources import ResourceType
from topoplace.dev.kubeapi.selectors import Selector, parse_selector
from topoplace.dev.kubeapi.server import KubeApiServer
from topoplace.dev.kubeapi.store import ObjectStore

__all__ = [
    "ApiError",
    "Change",
    "FaultPlan",
    "FaultReport",
    "KubeApiServer",
    "ObjectStore",
    "ResourceType",
    "Selector",
    "parse_selector",
]
