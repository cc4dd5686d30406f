"""KAI's Topology objects (kai.scheduler/v1alpha1) reach topology.levels as Kueue's do, under `kai.scheduler/<name>`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import msgspec
from cluster_fakes import CustomApi, RecordingPublisher, Sent
from cluster_objects import topology, topology_json
from kube_clients import client_for
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import TopologyLevelsEvent
from services.collector.cluster.kai_topologies import kai_levels_event
from services.collector.cluster.kinds import WATCHED_KINDS, Trackers
from services.collector.cluster.objects import Topology
from services.collector.cluster.watcher import ClusterWatcher
from topoplace.dev.kubeapi import KubeApiServer, resources

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"


def kai_topology_json(name: str, levels: list[str]) -> dict[str, Any]:
    """As KAI's documentation writes one: levels top first, the last one the node."""
    return {
        "apiVersion": "kai.scheduler/v1alpha1",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def kai_topology(name: str, levels: list[str]) -> Topology:
    return msgspec.convert(kai_topology_json(name, levels), Topology)


def levels_sent(key: str) -> Callable[[Sent], bool]:
    return lambda s: s.topic == topics.TOPOLOGY_LEVELS.name and s.key == key


def test_a_kai_topology_is_its_levels_under_its_qualified_name() -> None:
    event, problems = kai_levels_event(kai_topology("default", [BLOCK, RACK, HOSTNAME]), 4.0)
    assert event == TopologyLevelsEvent(name="kai.scheduler/default", levels=(BLOCK, RACK, HOSTNAME), observed_at=4.0)
    assert problems == []
    # an empty label is left out and reported, naming the KAI Topology
    event, problems = kai_levels_event(kai_topology("t", [RACK, ""]), 4.0)
    assert event.levels == (RACK,)
    assert [(p.object, p.field) for p in problems] == [("Topology t (kai.scheduler)", "spec.levels[1].nodeLabel")]


def test_kueue_and_kai_topologies_of_one_name_are_two_records_each_relisted_apart() -> None:
    """Both kinds seed from topology.levels: a relist of one never reports the other's records gone."""
    trackers = Trackers("topoplace", None)
    kueue = TopologyLevelsEvent(name="default", levels=(RACK,))
    kai = TopologyLevelsEvent(name="kai.scheduler/default", levels=(BLOCK, RACK))
    rows = {kind.name: kind for kind in WATCHED_KINDS}
    for name in ("topologies", "kai-topologies"):
        seed = rows[name].seed
        assert seed is not None and rows[name].seeded_from == topics.TOPOLOGY_LEVELS
        seed(trackers, [kueue, kai])
    # no KAI Topology listed: only its record is reported deleted, then tombstoned
    gone = trackers.kai_topologies.relisted([], 5.0).publications
    assert [(p.key, p.event is None) for p in gone] == [
        ("kai.scheduler/default", False),
        ("kai.scheduler/default", True),
    ]
    # the Kueue Topology listed as it was: nothing to say
    assert trackers.topologies.relisted([topology("default", [RACK])], 5.0).publications == []
    assert trackers.topologies.relisted([], 6.0).publications[0].key == "default"


async def test_the_watcher_publishes_kai_topologies_beside_kueue_ones(
    kube_api: KubeApiServer, publisher: RecordingPublisher
) -> None:
    kube_api.store.create(resources.TOPOLOGIES, topology_json("default", [RACK], version="v1beta2"))
    kube_api.store.create(resources.KAI_TOPOLOGIES, kai_topology_json("default", [BLOCK, RACK, HOSTNAME]))
    api = client_for(kube_api.url)
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        kai = (await publisher.wait_for(levels_sent("kai.scheduler/default")))[0].event
        assert isinstance(kai, TopologyLevelsEvent) and kai.levels == (BLOCK, RACK, HOSTNAME)
        kueue = (await publisher.wait_for(levels_sent("default")))[0].event
        assert isinstance(kueue, TopologyLevelsEvent) and kueue.levels == (RACK,)
        # one created while watching, then deleted: a deleted event, then a tombstone
        custom: CustomApi = client.CustomObjectsApi(api)
        await custom.create_cluster_custom_object(
            "kai.scheduler", "v1alpha1", "topologies", kai_topology_json("nvl72", [RACK, HOSTNAME])
        )
        late = (await publisher.wait_for(levels_sent("kai.scheduler/nvl72")))[0].event
        assert isinstance(late, TopologyLevelsEvent) and late.levels == (RACK, HOSTNAME)
        await custom.delete_cluster_custom_object("kai.scheduler", "v1alpha1", "topologies", "nvl72")
        deleted, tombstone = (await publisher.wait_for(levels_sent("kai.scheduler/nvl72"), count=3))[1:]
        assert isinstance(deleted.event, TopologyLevelsEvent) and deleted.event.deleted
        assert tombstone.event is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    # Kueue's Topology of the same name was never reported gone
    assert all(not getattr(s.event, "deleted", False) for s in publisher.matching(levels_sent("default")))
