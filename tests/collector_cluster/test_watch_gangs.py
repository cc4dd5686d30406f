"""Gangs: when the watcher publishes one, with what, and what the group's objects say."""

from __future__ import annotations

from typing import Any

import pytest
from cluster_objects import pod, podgroup

from schemas import topics
from schemas.events import (
    GangRef,
    LabelSelector,
    LifecyclePhase,
    NetworkConstraint,
    PendingGangEvent,
    PodLifecycleEvent,
    RunningMember,
    SubGroupPolicy,
    TopologyMode,
)
from services.collector.cluster import gangs
from services.collector.cluster.objects import Pod
from services.collector.cluster.trackers import Outcome, PodTracker

VOLCANO = {gangs.VOLCANO_GROUP_ANNOTATION: "job"}


def member(name: str, **kw: Any) -> Pod:
    return pod(name, namespace="ml", annotations={**VOLCANO, **kw.pop("annotations", {})}, **kw)


def kueue_member(name: str, annotations: dict[str, str] | None = None, **kw: Any) -> Pod:
    notes = {gangs.KUEUE_TOTAL_COUNT: "2", **(annotations or {})}
    return pod(name, namespace="ml", labels={gangs.KUEUE_GROUP_NAME: "kjob"}, annotations=notes, **kw)


def gang_events(outcome: Outcome) -> list[PendingGangEvent]:
    events = [p.event for p in outcome.publications if isinstance(p.event, PendingGangEvent)]
    for publication in outcome.publications:
        if isinstance(publication.event, PendingGangEvent):
            assert (publication.topic, publication.key) == (topics.GANGS_PENDING.name, publication.event.name)
    return events


def pending_names(event: PendingGangEvent) -> list[str]:
    return [m.name for m in event.members]


def test_a_volcano_gang_waits_for_its_podgroup_then_goes_out_whole() -> None:
    tracker = PodTracker("topoplace")
    first = tracker.observe(member("w-1"), 1.0)
    second = tracker.observe(member("w-0"), 2.0)
    # members never go out one by one
    assert first.publications == [] and second.publications == []
    out = gang_events(tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 3.0))
    assert len(out) == 1
    gang = out[0]
    assert (gang.name, gang.namespace, gang.min_member, gang.source) == ("ml/job", "ml", 2, "podgroup")
    assert pending_names(gang) == ["w-0", "w-1"] and gang.running == ()
    assert {m.gang for m in gang.members} == {GangRef(name="ml/job", min_member=2)}
    assert gang.members[0].requests == {"nvidia.com/gpu": "1"}


def test_a_gang_goes_out_once_it_has_its_minimum() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=3), 1.0)
    assert gang_events(tracker.observe(member("w-0"), 2.0)) == []
    assert gang_events(tracker.observe(member("w-1"), 3.0)) == []
    out = gang_events(tracker.observe(member("w-2"), 4.0))
    assert [pending_names(g) for g in out] == [["w-0", "w-1", "w-2"]]


def test_published_again_when_membership_changes_and_at_resync_only() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 1.0)
    tracker.observe(member("w-0"), 1.0)
    assert len(gang_events(tracker.observe(member("w-1"), 2.0))) == 1
    # the binder's annotations on a member change nothing
    assert tracker.observe(member("w-1", annotations={"x": "y"}), 3.0).publications == []
    assert [pending_names(g) for g in gang_events(tracker.observe(member("w-2"), 4.0))] == [["w-0", "w-1", "w-2"]]
    pods = [member("w-0"), member("w-1"), member("w-2")]
    assert gang_events(tracker.relisted(pods, 5.0)) == []
    resync = gang_events(tracker.relisted(pods, 6.0, force=True))
    assert [pending_names(g) for g in resync] == [["w-0", "w-1", "w-2"]]  # once, not once per member


def test_bound_members_are_running_and_count_toward_the_minimum() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=3), 1.0)
    for name in ("w-0", "w-1", "w-2"):
        tracker.observe(member(name), 1.0)
    out = tracker.observe(member("w-0", node="gpu-1", phase="Running"), 2.0)
    bound = [p.event for p in out.publications if isinstance(p.event, PodLifecycleEvent)]
    assert [(e.phase, e.node, e.gang, e.ours) for e in bound] == [(LifecyclePhase.BOUND, "gpu-1", "ml/job", True)]
    gang = gang_events(out)
    assert [pending_names(g) for g in gang] == [["w-1", "w-2"]]
    assert gang[0].running == (RunningMember(uid="uid-ml-w-0", name="w-0", node="gpu-1"),)
    # the last pending members bound: nothing left to place
    tracker.observe(member("w-1", node="gpu-1"), 3.0)
    assert gang_events(tracker.observe(member("w-2", node="gpu-2"), 4.0)) == []


def test_a_member_recreated_after_the_others_ran_goes_out_with_them_running() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 1.0)
    tracker.observe(member("w-0", node="gpu-1"), 1.0)
    tracker.observe(member("w-1", node="gpu-1"), 1.0)
    tracker.gone("uid-ml-w-1", 2.0)
    out = gang_events(tracker.observe(member("w-1", uid="uid-new"), 3.0))
    assert [(pending_names(g), [r.name for r in g.running]) for g in out] == [(["w-1"], ["w-0"])]


def test_a_deleted_member_leaves_the_gang_waiting_below_its_minimum() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 1.0)
    tracker.observe(member("w-0"), 1.0)
    tracker.observe(member("w-1"), 1.0)
    out = tracker.gone("uid-ml-w-1", 2.0)
    deleted = [p.event for p in out.publications if isinstance(p.event, PodLifecycleEvent)]
    assert [(e.phase, e.gang) for e in deleted] == [(LifecyclePhase.DELETED, "ml/job")]
    assert gang_events(out) == []
    tracker.gone("uid-ml-w-0", 3.0)
    assert len(tracker.gangs) == 0  # nothing kept of a gang without members


def test_without_its_podgroup_a_gang_waits_again() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=1), 1.0)
    assert len(gang_events(tracker.observe(member("w-0"), 1.0))) == 1
    tracker.podgroup_gone("ml/job", 2.0)
    assert gang_events(tracker.observe(member("w-1"), 3.0)) == []
    assert gang_events(tracker.relisted([member("w-0"), member("w-1")], 4.0, force=True)) == []
    # listed again with a changed minimum: out at once
    out = gang_events(tracker.podgroups_relisted([podgroup("job", namespace="ml", min_member=2)], 5.0))
    assert [(pending_names(g), g.min_member) for g in out] == [(["w-0", "w-1"], 2)]


def test_a_podgroup_change_republishes_its_gang() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=1), 1.0)
    tracker.observe(member("w-0"), 1.0)
    network = {"mode": "soft", "highestTierAllowed": 2}
    out = gang_events(tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=1, network=network), 2.0))
    assert [g.network for g in out] == [NetworkConstraint(mode=TopologyMode.SOFT, highest_tier=2)]
    same = podgroup("job", namespace="ml", min_member=1, network=network)
    assert gang_events(tracker.podgroup_observed(same, 3.0)) == []


def test_podgroup_policy_reads_network_topology_and_subgroups() -> None:
    group = podgroup(
        "job",
        min_member=8,
        network={"mode": "hard", "highestTierName": "spine"},
        sub_groups=[
            {
                "name": "tp",
                "subGroupSize": 4,
                "minSubGroups": 2,
                "matchLabelKeys": ["replica-index"],
                "labelSelector": {"matchLabels": {"role": "worker"}},
                "networkTopology": {"highestTierAllowed": 1},
            }
        ],
    )
    policy, problems = gangs.podgroup_policy(group)
    assert problems == []
    assert policy == gangs.GangPolicy(
        min_member=8,
        network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="spine"),
        sub_groups=(
            SubGroupPolicy(
                name="tp",
                sub_group_size=4,
                min_sub_groups=2,
                match_label_keys=("replica-index",),
                label_selector=LabelSelector(match_labels={"role": "worker"}),
                network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier=1),
            ),
        ),
    )


def test_podgroup_policy_reports_bad_fields_and_keeps_a_minimum_of_one() -> None:
    group = podgroup("job", min_member=0, network={"mode": "strict", "highestTierAllowed": -1})
    policy, problems = gangs.podgroup_policy(group)
    assert policy.min_member == 1 and policy.network == NetworkConstraint(mode=TopologyMode.HARD)
    assert [p.field for p in problems] == ["spec.networkTopology.mode", "spec.networkTopology.highestTierAllowed"]
    assert all(p.object == "default/job" for p in problems)


def test_a_kueue_pod_group_goes_out_at_its_total_count_with_its_topology() -> None:
    tracker = PodTracker("topoplace")
    notes = {
        gangs.KUEUE_REQUIRED_TOPOLOGY: "cloud/block",
        gangs.KUEUE_SLICE_REQUIRED_TOPOLOGY: "cloud/rack",
        gangs.KUEUE_SLICE_SIZE: "1",
    }
    assert tracker.observe(kueue_member("k-0", notes), 1.0).publications == []
    out = gang_events(tracker.observe(kueue_member("k-1", notes), 2.0))
    assert len(out) == 1
    gang = out[0]
    assert (gang.name, gang.source, gang.min_member, pending_names(gang)) == ("ml/kjob", "kueue", 2, ["k-0", "k-1"])
    assert gang.network == NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="cloud/block")
    assert gang.sub_groups == (
        SubGroupPolicy(
            name=gangs.KUEUE_SLICE_POLICY,
            sub_group_size=1,
            network=NetworkConstraint(mode=TopologyMode.HARD, highest_tier_name="cloud/rack"),
        ),
    )


def test_kueue_preferred_topology_is_soft() -> None:
    policy, problems = gangs.kueue_policy(kueue_member("k", {gangs.KUEUE_PREFERRED_TOPOLOGY: "cloud/rack"}))
    assert problems == [] and policy.network == NetworkConstraint(
        mode=TopologyMode.SOFT, highest_tier_name="cloud/rack"
    )


@pytest.mark.parametrize(
    ("annotations", "field"),
    [
        ({gangs.KUEUE_TOTAL_COUNT: "many"}, f"metadata.annotations[{gangs.KUEUE_TOTAL_COUNT}]"),
        ({gangs.KUEUE_SLICE_REQUIRED_TOPOLOGY: "cloud/rack"}, f"metadata.annotations[{gangs.KUEUE_SLICE_SIZE}]"),
        (
            {gangs.KUEUE_SLICE_REQUIRED_TOPOLOGY: "cloud/rack", gangs.KUEUE_SLICE_SIZE: "0"},
            f"metadata.annotations[{gangs.KUEUE_SLICE_SIZE}]",
        ),
    ],
)
def test_kueue_annotations_that_cannot_be_read_are_reported(annotations: dict[str, str], field: str) -> None:
    policy, problems = gangs.kueue_policy(kueue_member("k", annotations))
    assert [p.field for p in problems] == [field]
    assert policy.sub_groups == () and policy.min_member >= 1


def test_a_kueue_pod_without_total_count_is_reported() -> None:
    p = pod("k", namespace="ml", labels={gangs.KUEUE_GROUP_NAME: "kjob"})
    policy, problems = gangs.kueue_policy(p)
    assert policy.min_member == 1 and [pr.field for pr in problems] == [
        f"metadata.annotations[{gangs.KUEUE_TOTAL_COUNT}]"
    ]


@pytest.mark.parametrize(
    ("annotations", "labels", "expected"),
    [
        ({gangs.VOLCANO_GROUP_ANNOTATION: "a"}, {}, gangs.Membership(gang="ml/a", source=gangs.GangSource.PODGROUP)),
        ({}, {gangs.VOLCANO_GROUP_LABEL: "b"}, gangs.Membership(gang="ml/b", source=gangs.GangSource.PODGROUP)),
        ({}, {gangs.KUEUE_GROUP_NAME: "c"}, gangs.Membership(gang="ml/c", source=gangs.GangSource.KUEUE)),
        ({gangs.KUEUE_GROUP_NAME: "d"}, {}, gangs.Membership(gang="ml/d", source=gangs.GangSource.KUEUE)),
        ({}, {}, None),
    ],
)
def test_membership(annotations: dict[str, str], labels: dict[str, str], expected: gangs.Membership | None) -> None:
    assert gangs.membership_of(pod("p", namespace="ml", annotations=annotations, labels=labels)) == expected


def test_gang_pods_of_other_schedulers_are_not_assembled() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=1), 1.0)
    assert tracker.observe(member("w-0", scheduler="volcano"), 2.0).publications == []
    assert len(tracker.gangs) == 0


def test_a_running_member_gone_does_not_republish_the_same_pending_members() -> None:
    tracker = PodTracker("topoplace")
    tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=2), 1.0)
    tracker.observe(member("w-0", node="gpu-1"), 1.0)
    tracker.observe(member("w-1", node="gpu-1"), 1.0)
    assert len(gang_events(tracker.observe(member("w-2"), 2.0))) == 1
    assert gang_events(tracker.gone("uid-ml-w-0", 3.0)) == []
    # below the minimum it waits; back at it with the same pending members, it goes out again
    tracker.gone("uid-ml-w-1", 4.0)
    out = gang_events(tracker.observe(member("w-1", uid="uid-new", node="gpu-2"), 5.0))
    assert [(pending_names(g), [r.name for r in g.running]) for g in out] == [(["w-2"], ["w-1"])]


def test_members_carry_every_label_and_stay_bounded() -> None:
    """A member keeps every label (its subgroups, pod affinity and spread read them), even when the PodGroup
    comes last; one over the bound goes out reduced, with the reason."""
    tracker = PodTracker("topoplace")
    labels = {"rack": "r1", "team.example.com/cost-center": "x" * 60, **{f"l{i}": "v" * 60 for i in range(200)}}
    huge = {"nvidia.com/use-gpuuuid": ",".join(f"GPU-{i:032x}" for i in range(2_000))}  # ~74 KB the placer reads
    tracker.observe(member("w-0", labels=labels), 1.0)
    tracker.observe(member("w-1", labels=labels, annotations=huge), 1.0)
    group = podgroup("job", namespace="ml", sub_groups=[{"name": "racks", "matchLabelKeys": ["rack"]}])
    (gang,) = gang_events(tracker.podgroup_observed(group, 2.0))
    first, second = gang.members
    assert first.labels == labels and not first.unpublishable
    assert second.unpublishable.startswith("the pod's scheduling event is ")
    assert (second.name, second.annotations, second.gang) == ("w-1", {}, first.gang)


def test_members_keep_their_pod_index_so_the_engine_orders_them_by_rank() -> None:
    tracker = PodTracker("topoplace")
    index = {"batch.kubernetes.io/job-completion-index": "3", "apps.kubernetes.io/pod-index": "3", "other": "x"}
    tracker.observe(member("w-3", labels=index, annotations={"batch.kubernetes.io/job-completion-index": "3"}), 1.0)
    (gang,) = gang_events(tracker.podgroup_observed(podgroup("job", namespace="ml", min_member=1), 2.0))
    (first,) = gang.members
    assert first.labels == index
    assert first.annotations == {**VOLCANO, "batch.kubernetes.io/job-completion-index": "3"}
