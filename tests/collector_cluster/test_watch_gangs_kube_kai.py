"""Gangs of Kubernetes' Workload API (scheduling.k8s.io, v1alpha1 and v1alpha2) and of KAI (scheduling.run.ai):
read from their objects as `engine place --cluster` reads them, published as the placer's gangs."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from cluster_fakes import CustomApi, RecordingPublisher, Sent
from cluster_objects import pod, pod_json, podgroup
from kube_clients import client_for
from kubernetes_asyncio import client

from schemas import topics
from schemas.events import (
    LabelSelector,
    LabelSelectorRequirement,
    NetworkConstraint,
    PendingGangEvent,
    SubGroupPolicy,
    TopologyMode,
)
from schemas.gangs_kai import KAI_SUBGROUP_LABEL, KaiPodGroup
from schemas.gangs_kube import KubePodGroup, Workload
from services.collector.cluster import gangs
from services.collector.cluster.kai import KaiPodGroupsOfPods
from services.collector.cluster.publish import BAD_FIELDS
from services.collector.cluster.trackers import Outcome, PodTracker
from services.collector.cluster.watcher import ClusterWatcher
from services.collector.cluster.workload_api import WorkloadApiGangs
from topoplace.dev.kubeapi import KubeApiServer, resources

RACK = "topology.example.com/rack"


def gang_events(outcome: Outcome) -> list[PendingGangEvent]:
    return [p.event for p in outcome.publications if isinstance(p.event, PendingGangEvent)]


def workload_json(name: str, spec: dict[str, Any], version: str = "v1alpha2") -> dict[str, Any]:
    return {
        "apiVersion": f"scheduling.k8s.io/{version}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def kube_podgroup_json(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def kai_podgroup_json(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


GANG_OF_TWO_IN_A_RACK = {
    "schedulingPolicy": {"gang": {"minCount": 2}},
    "schedulingConstraints": {"topology": [{"key": RACK}]},
}


def test_a_v1alpha2_podgroup_takes_its_workload_templates_policy() -> None:
    pods = PodTracker("topoplace")
    api = WorkloadApiGangs(pods)
    link = {"schedulingGroup": {"podGroupName": "train-0"}}
    for name in ("w-0", "w-1", "w-2"):
        assert gang_events(pods.observe(pod(name, namespace="ml", spec_extra=link), 1.0)) == []
    template_ref = {"podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}}
    group = msgspec.convert(kube_podgroup_json("train-0", template_ref), KubePodGroup)
    # a PodGroup without a policy of its own, its Workload not seen yet: reported, the gang waits
    waiting = api.podgroups.observe(group, 2.0)
    assert gang_events(waiting) == []
    assert [p.field for p in waiting.problems] == ["spec.schedulingPolicy"]
    workload = workload_json("train", {"podGroupTemplates": [{"name": "workers", **GANG_OF_TWO_IN_A_RACK}]})
    out = gang_events(api.workloads.observe(msgspec.convert(workload, Workload), 3.0))
    assert len(out) == 1
    gang = out[0]
    assert (gang.name, gang.min_member, gang.source) == ("ml/train-0", 2, "scheduling.k8s.io")
    assert gang.network == NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=RACK)
    assert [m.name for m in gang.members] == ["w-0", "w-1", "w-2"]
    # the Workload gone: the PodGroup has no policy again, and the gang is not sent again
    assert [p.field for p in api.workloads.gone("ml/train", 4.0).problems] == []
    assert gang_events(pods.observe(pod("w-3", namespace="ml", spec_extra=link), 5.0)) == []


def test_a_v1alpha1_workloads_pod_group_is_one_gang_per_replica_key() -> None:
    pods = PodTracker("topoplace")
    api = WorkloadApiGangs(pods)
    workload = workload_json(
        "train", {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]}, version="v1alpha1"
    )
    api.workloads.relisted([msgspec.convert(workload, Workload)], 1.0)
    published: list[PendingGangEvent] = []
    for replica in ("0", "1"):
        ref = {"workloadRef": {"name": "train", "podGroup": "workers", "podGroupReplicaKey": replica}}
        for i in range(2):
            published += gang_events(pods.observe(pod(f"r{replica}-{i}", namespace="ml", spec_extra=ref), 2.0))
    assert [(g.name, g.min_member, [m.name for m in g.members]) for g in published] == [
        ("ml/train-workers-0", 2, ["r0-0", "r0-1"]),
        ("ml/train-workers-1", 2, ["r1-0", "r1-1"]),
    ]
    assert all(g.network is None for g in published)


def test_a_workload_ref_without_its_pod_group_is_reported_and_the_pod_is_no_member() -> None:
    pods = PodTracker("topoplace")
    outcome = pods.observe(pod("w-0", namespace="ml", spec_extra={"workloadRef": {"name": "train"}}), 1.0)
    assert [(p.field, p.object) for p in outcome.problems] == [("spec.workloadRef.podGroup", "ml/w-0")]
    assert [p.topic for p in outcome.publications] == [topics.PODS_PENDING.name]  # placed alone


def test_a_workload_api_policy_that_cannot_be_read_is_reported_and_skipped() -> None:
    pods = PodTracker("topoplace")
    api = WorkloadApiGangs(pods)
    both = {"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}
    bad = api.podgroups.observe(msgspec.convert(kube_podgroup_json("bad", both), KubePodGroup), 1.0)
    assert [(p.object, p.field) for p in bad.problems] == [
        ("PodGroup ml/bad (scheduling.k8s.io)", "spec.schedulingPolicy")
    ]
    assert "exactly one of basic and gang" in bad.problems[0].reason
    # the next object is read as usual; the bad one's problem is reported with it only once it changes
    good = api.podgroups.observe(msgspec.convert(kube_podgroup_json("good", GANG_OF_TWO_IN_A_RACK), KubePodGroup), 2.0)
    assert good.problems == []
    link = {"schedulingGroup": {"podGroupName": "good"}}
    pods.observe(pod("g-0", namespace="ml", spec_extra=link), 3.0)
    assert [g.name for g in gang_events(pods.observe(pod("g-1", namespace="ml", spec_extra=link), 3.0))] == ["ml/good"]


NESTED_KAI = {
    "minMember": 4,
    "topologyConstraint": {"topology": "fabric", "requiredTopologyLevel": RACK},
    "subGroups": [
        {"name": "decode", "minMember": 0},
        {"name": "decode-leader", "parent": "decode", "minMember": 1},
        {
            "name": "decode-workers",
            "parent": "decode",
            "minMember": 3,
            "topologyConstraint": {"requiredTopologyLevel": "kubernetes.io/hostname"},
        },
    ],
}


def kai_member(name: str, subgroup: str) -> Any:
    return pod(name, namespace="ml", annotations={"pod-group-name": "serve"}, labels={KAI_SUBGROUP_LABEL: subgroup})


def test_a_kai_podgroup_with_nested_subgroups() -> None:
    pods = PodTracker("topoplace")
    kai = KaiPodGroupsOfPods(pods)
    pods.observe(kai_member("leader", "decode-leader"), 1.0)
    for i in range(3):
        pods.observe(kai_member(f"worker-{i}", "decode-workers"), 1.0)
    out = gang_events(kai.relisted([msgspec.convert(kai_podgroup_json("serve", NESTED_KAI), KaiPodGroup)], 2.0))
    assert len(out) == 1
    gang = out[0]
    assert (gang.name, gang.min_member, gang.source) == ("ml/serve", 4, "kai")
    assert gang.network == NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=RACK)

    def under(*names: str) -> LabelSelector:
        return LabelSelector(
            match_expressions=(LabelSelectorRequirement(key=KAI_SUBGROUP_LABEL, operator="In", values=names),)
        )

    assert gang.sub_groups == (
        SubGroupPolicy(name="decode", label_selector=under("decode-leader", "decode-workers")),
        SubGroupPolicy(
            name="decode-leader",
            sub_group_size=1,
            min_sub_groups=1,
            match_label_keys=(KAI_SUBGROUP_LABEL,),
            label_selector=under("decode-leader"),
            parent="decode",
        ),
        SubGroupPolicy(
            name="decode-workers",
            sub_group_size=3,
            min_sub_groups=1,
            match_label_keys=(KAI_SUBGROUP_LABEL,),
            label_selector=under("decode-workers"),
            network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="kubernetes.io/hostname"),
            parent="decode",
        ),
    )
    assert sorted(m.name for m in gang.members) == ["leader", "worker-0", "worker-1", "worker-2"]


def test_a_kai_podgroup_that_cannot_be_read_is_reported_and_its_gang_waits() -> None:
    pods = PodTracker("topoplace")
    kai = KaiPodGroupsOfPods(pods)
    for i in range(2):
        pods.observe(pod(f"w-{i}", namespace="ml", annotations={"pod-group-name": "train"}), 1.0)
    orphan = {"minMember": 2, "subGroups": [{"name": "a", "parent": "nobody"}]}
    bad = kai.observe(msgspec.convert(kai_podgroup_json("train", orphan), KaiPodGroup), 2.0)
    assert gang_events(bad) == []
    assert [(p.object, p.field) for p in bad.problems] == [
        ("PodGroup ml/train (scheduling.run.ai)", "spec.subGroups[0].parent")
    ]
    assert "no subgroup is named 'nobody'" in bad.problems[0].reason
    fixed = kai.observe(msgspec.convert(kai_podgroup_json("train", {"minMember": 2}), KaiPodGroup), 3.0)
    assert [(g.name, g.min_member) for g in gang_events(fixed)] == [("ml/train", 2)]


def test_membership_order_workload_api_then_kai_then_volcano() -> None:
    both = {"pod-group-name": "kai-group", gangs.VOLCANO_GROUP_ANNOTATION: "volcano-group"}
    kube = pod("p", namespace="ml", annotations=both, spec_extra={"schedulingGroup": {"podGroupName": "pg"}})
    assert gangs.membership_of(kube) == gangs.Membership(gang="ml/pg", source=gangs.GangSource.KUBE)
    kai = pod("p", namespace="ml", annotations=both)
    assert gangs.membership_of(kai) == gangs.Membership(gang="ml/kai-group", source=gangs.GangSource.KAI)


# --- through the test API server ----------------------------------------------------------------


def gang_sent(name: str) -> Any:
    return lambda s: s.topic == topics.GANGS_PENDING.name and s.key == name


def api_pod(name: str, **kw: Any) -> dict[str, Any]:
    body = pod_json(name, **kw)
    for field in ("uid", "resourceVersion"):
        body["metadata"].pop(field)
    return body


async def test_the_watcher_reads_workload_api_and_kai_gangs_and_skips_a_malformed_object(
    kube_api: KubeApiServer, publisher: RecordingPublisher
) -> None:
    store = kube_api.store
    bad_fields = BAD_FIELDS.labels(field="spec.subGroups")._value.get()
    # malformed: a string minMember (not decoded: skipped by the informer), a parent nobody is
    store.create(resources.KAI_PODGROUPS, kai_podgroup_json("typo", {"minMember": "two"}), namespace="ml")
    orphan = {"minMember": 1, "subGroups": [{"name": "a", "parent": "nobody"}]}
    store.create(resources.KAI_PODGROUPS, kai_podgroup_json("orphan", orphan), namespace="ml")
    store.create(resources.KAI_PODGROUPS, kai_podgroup_json("serve", NESTED_KAI), namespace="ml")
    store.create(resources.KUBE_PODGROUPS, kube_podgroup_json("train", GANG_OF_TWO_IN_A_RACK), namespace="ml")
    for name in ("leader", "worker-0", "worker-1", "worker-2"):
        labels = {KAI_SUBGROUP_LABEL: "decode-leader" if name == "leader" else "decode-workers"}
        body = api_pod(name, namespace="ml", annotations={"pod-group-name": "serve"}, labels=labels)
        store.create(resources.PODS, body, namespace="ml")
    for name in ("t-0", "t-1"):
        body = api_pod(name, namespace="ml", spec_extra={"schedulingGroup": {"podGroupName": "train"}})
        store.create(resources.PODS, body, namespace="ml")
    api = client_for(kube_api.url)
    watcher = ClusterWatcher(api, publisher, scheduler_name="topoplace", resync_seconds=60, watch_timeout=30)
    task = asyncio.create_task(watcher.run())
    try:
        await asyncio.wait_for(watcher.wait_ready(), 5)
        served: list[Sent] = await publisher.wait_for(gang_sent("ml/serve"))
        kai = served[0].event
        assert isinstance(kai, PendingGangEvent) and (kai.source, kai.min_member, len(kai.sub_groups)) == ("kai", 4, 3)
        trained = (await publisher.wait_for(gang_sent("ml/train")))[0].event
        assert isinstance(trained, PendingGangEvent)
        assert trained.network == NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name=RACK)
        # a KAI PodGroup created while watching is read too
        custom: CustomApi = client.CustomObjectsApi(api)
        await custom.create_namespaced_custom_object(
            "scheduling.run.ai", "v2alpha2", "ml", "podgroups", kai_podgroup_json("late", {"minMember": 1})
        )
        late = api_pod("late-0", namespace="ml", annotations={"pod-group-name": "late"})
        await client.CoreV1Api(api).create_namespaced_pod("ml", late)
        await publisher.wait_for(gang_sent("ml/late"))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
    assert BAD_FIELDS.labels(field="spec.subGroups")._value.get() >= bad_fields + 1
    assert publisher.matching(gang_sent("ml/typo")) == [] and publisher.matching(gang_sent("ml/orphan")) == []


def test_policies_are_filed_by_framework() -> None:
    """A KAI PodGroup does not stand in for a Volcano one of the same name, and its relist keeps Volcano's."""
    pods = PodTracker("topoplace")
    kai = KaiPodGroupsOfPods(pods)
    volcano = {gangs.VOLCANO_GROUP_ANNOTATION: "job"}
    for i in range(2):
        pods.observe(pod(f"w-{i}", namespace="ml", annotations=volcano), 1.0)
    assert gang_events(kai.observe(msgspec.convert(kai_podgroup_json("job", {"minMember": 2}), KaiPodGroup), 2.0)) == []
    out = gang_events(pods.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 3.0))
    assert [(g.name, g.source) for g in out] == [("ml/job", "podgroup")]
    assert gang_events(kai.relisted([], 4.0)) == []  # the KAI PodGroup gone: Volcano's policy stays
    again = gang_events(pods.observe(pod("w-2", namespace="ml", annotations=volcano), 5.0))
    assert [(g.name, g.min_member, len(g.members)) for g in again] == [("ml/job", 2, 3)]
