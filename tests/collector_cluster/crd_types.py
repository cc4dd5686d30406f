"""Volcano PodGroups and Kueue Topologies for the test API server, where it does not serve them itself."""

from __future__ import annotations

import pytest

from topoplace.dev.kubeapi import KubeApiServer, ObjectStore, resources
from topoplace.dev.kubeapi.resources import ResourceType


def _resource(plural: str, kind: str, group: str, version: str, *, namespaced: bool) -> ResourceType:
    served = resources.BY_KEY.get(f"{plural}.{group}")
    if served is not None and served.version == version:
        return served
    return ResourceType(
        plural=plural,
        kind=kind,
        group=group,
        version=version,
        namespaced=namespaced,
        has_status=True,
        field_labels=frozenset({"metadata.name", "metadata.namespace"}),
        custom=True,
    )


PODGROUPS = _resource("podgroups", "PodGroup", "scheduling.volcano.sh", "v1beta1", namespaced=True)
TOPOLOGIES = _resource("topologies", "Topology", "kueue.x-k8s.io", "v1beta1", namespaced=False)


def server_with(monkeypatch: pytest.MonkeyPatch, *extra: ResourceType) -> KubeApiServer:
    """A test API server that also serves `extra`: for this test they are among the built-in types."""
    served = (*resources.ALL, *(r for r in extra if r not in resources.ALL))
    monkeypatch.setattr(resources, "ALL", served)
    monkeypatch.setattr(resources, "BY_KEY", {r.key: r for r in served})
    return KubeApiServer(store=ObjectStore(), served=served, bookmark_interval=0.5)
