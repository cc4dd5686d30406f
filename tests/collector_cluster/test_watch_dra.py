"""DRA in the cluster watcher: ResourceSlices as events, a pod's claims found and read."""

from __future__ import annotations

from typing import Any

import msgspec
from cluster_objects import pod_json

from schemas import topics
from schemas.dra import ClaimConstraint, ClaimRequest, ClaimSelector, DraDevice, PodClaim
from schemas.dra_objects import ResourceClaimSpec, ResourceSliceSpec
from schemas.events import DeviceClassEvent, PendingPodEvent, ResourceSliceEvent
from services.collector.cluster.dra import (
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    allocated_claim_tracker,
    class_tracker,
    resolved,
    slice_tracker,
    waiting,
)
from services.collector.cluster.objects import Pod
from services.collector.cluster.pod_feeds import ClaimsOfPods
from services.collector.cluster.trackers import PodTracker
from services.collector.cluster.translate import claim_refs

SLICE: dict[str, Any] = {
    "metadata": {"name": "n1-gpu.nvidia.com-abcde"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "pool": {"name": "n1", "generation": 1},
        "nodeName": "n1",
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "uuid": {"string": "GPU-aaa"},
                    "index": {"int": 0},
                    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                    "odd": {},
                },
                "capacity": {"memory": {"value": "80Gi"}},
            }
        ],
    },
}


def test_a_slice_becomes_an_event_with_qualified_attributes_and_the_uuid() -> None:
    event = slice_tracker().observe(msgspec.convert(SLICE, ResourceSlice), 5.0)
    (publication,) = event.publications
    assert (publication.topic, publication.key) == (topics.RESOURCE_SLICES.name, "n1-gpu.nvidia.com-abcde")
    assert publication.event == ResourceSliceEvent(
        name="n1-gpu.nvidia.com-abcde",
        node="n1",
        driver="gpu.nvidia.com",
        pool="n1",
        devices=(
            DraDevice(
                name="gpu-0",
                uuid="GPU-aaa",
                attributes={
                    "gpu.nvidia.com/uuid": "GPU-aaa",
                    "gpu.nvidia.com/index": 0,
                    "resource.kubernetes.io/pcieRoot": "pci0000:00",
                },
                capacity={"memory": "80Gi"},
            ),
        ),
        spec=msgspec.convert(SLICE["spec"], ResourceSliceSpec),
        observed_at=5.0,
    )
    assert [p.field for p in event.problems] == ["spec.devices[gpu-0].attributes[odd]"]


def test_a_deleted_slice_is_a_deleted_event_then_a_tombstone() -> None:
    tracker = slice_tracker()
    tracker.observe(msgspec.convert(SLICE, ResourceSlice), 1.0)
    out = tracker.gone("n1-gpu.nvidia.com-abcde", 2.0).publications
    assert isinstance(out[0].event, ResourceSliceEvent) and out[0].event.deleted and not out[0].event.devices
    assert out[1].event is None


def claim_pod(status: list[dict[str, str]] | None = None) -> Pod:
    body = pod_json(
        "trainer",
        spec_extra={
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "two-gpus"},
                {"name": "shared", "resourceClaimName": "team-claim"},
            ]
        },
    )
    if status is not None:
        body["status"]["resourceClaimStatuses"] = status
    return msgspec.convert(body, Pod)


def test_a_template_claim_is_named_once_the_controller_made_it() -> None:
    assert [c.claim_name for c in claim_refs(claim_pod())] == ["", "team-claim"]
    made = claim_pod([{"name": "gpu", "resourceClaimName": "trainer-gpu-x1y2z"}])
    assert [c.claim_name for c in claim_refs(made)] == ["trainer-gpu-x1y2z", "team-claim"]


def test_the_pod_is_published_again_when_its_template_claim_is_made() -> None:
    tracker = PodTracker("topoplace")
    first = tracker.observe(claim_pod(), 1.0).publications
    made = claim_pod([{"name": "gpu", "resourceClaimName": "trainer-gpu-x1y2z"}])
    second = tracker.observe(made, 2.0).publications
    assert len(first) == len(second) == 1
    assert isinstance(second[0].event, PendingPodEvent)
    assert [c.claim_name for c in second[0].event.claims] == ["trainer-gpu-x1y2z", "team-claim"]
    assert tracker.observe(made, 3.0).publications == []  # nothing new


CLAIM: dict[str, Any] = {
    "metadata": {"name": "trainer-gpu-x1y2z", "namespace": "default", "uid": "claim-uid"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "gpus",
                    "exactly": {
                        "deviceClassName": "gpu.nvidia.com",
                        "count": 2,
                        "selectors": [{"cel": {"expression": 'device.driver == "gpu.nvidia.com"'}}],
                    },
                }
            ],
            "constraints": [{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
        }
    },
}


def test_a_claim_fills_in_its_reference() -> None:
    ref = PodClaim(pod_claim_name="gpu", claim_name="trainer-gpu-x1y2z")
    assert resolved(ref, msgspec.convert(CLAIM, ResourceClaim)) == PodClaim(
        pod_claim_name="gpu",
        claim_name="trainer-gpu-x1y2z",
        claim_uid="claim-uid",
        requests=(
            ClaimRequest(
                name="gpus",
                device_class="gpu.nvidia.com",
                count=2,
                selectors=(ClaimSelector(cel='device.driver == "gpu.nvidia.com"'),),
            ),
        ),
        constraints=(ClaimConstraint(requests=("gpus",), match_attribute="resource.kubernetes.io/pcieRoot"),),
        spec=msgspec.convert(CLAIM["spec"], ResourceClaimSpec),
    )


def test_a_first_available_request_travels_whole_in_the_spec() -> None:
    claim = {
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "r",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
                            {"name": "small", "deviceClassName": "gpu.nvidia.com"},
                        ],
                    }
                ],
                "config": [{"requests": ["r"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}],
            }
        },
    }
    got = resolved(PodClaim(pod_claim_name="g", claim_name="c"), msgspec.convert(claim, ResourceClaim))
    assert got.spec is not None and got.waiting == ""
    (request,) = got.spec.devices.requests
    assert [s.name for s in request.first_available] == ["big", "small"]
    assert got.spec.devices.config[0].opaque is not None
    assert got.spec.devices.config[0].opaque.parameters == {"a": 1}


def test_a_claim_not_made_or_not_found_or_being_deleted_says_why_in_kube_schedulers_words() -> None:
    from_template = waiting("team-a", "trainer", PodClaim(pod_claim_name="gpu", claim_name=""))
    assert from_template.waiting == 'pod "team-a/trainer": ResourceClaim not created yet'
    named = waiting("team-a", "trainer", PodClaim(pod_claim_name="gpu", claim_name="mine"))
    assert named.waiting == 'resourceclaim.resource.k8s.io "mine" not found'
    doomed = msgspec.convert(
        {**CLAIM, "metadata": {**CLAIM["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}, ResourceClaim
    )
    ref = PodClaim(pod_claim_name="gpu", claim_name="trainer-gpu-x1y2z")
    assert resolved(ref, doomed).waiting == "resourceclaim default/trainer-gpu-x1y2z is being deleted"


def test_a_device_class_is_an_event_with_its_selectors_and_config() -> None:
    body = {
        "metadata": {"name": "gpu.example.com"},
        "spec": {
            "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}],
            "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "mps"}}}],
        },
    }
    tracker = class_tracker()
    (publication,) = tracker.observe(msgspec.convert(body, DeviceClass), 1.0).publications
    assert (publication.topic, publication.key) == (topics.RESOURCE_CLASSES.name, "gpu.example.com")
    assert isinstance(publication.event, DeviceClassEvent)
    assert publication.event.spec.selectors[0].cel is not None
    assert publication.event.spec.config[0].opaque is not None
    gone = tracker.gone("gpu.example.com", 2.0).publications
    assert isinstance(gone[0].event, DeviceClassEvent) and gone[0].event.deleted and gone[1].event is None


def test_a_pending_pod_goes_out_again_when_a_claim_it_names_first_appears() -> None:
    pods = PodTracker("topoplace")
    claims = ClaimsOfPods(allocated_claim_tracker(), pods)
    (first,) = pods.observe(claim_pod(), 1.0).publications  # names "team-claim", which does not exist yet
    team_claim = msgspec.convert(
        {**CLAIM, "metadata": {"name": "team-claim", "namespace": "default", "uid": "team-uid"}}, ResourceClaim
    )
    (again,) = claims.observe(team_claim, 2.0).publications
    assert (again.topic, again.key, again.event) == (topics.PODS_PENDING.name, first.key, first.event)
    assert claims.observe(team_claim, 3.0).publications == []  # an update of it is no arrival
    other = msgspec.convert({**CLAIM, "metadata": {"name": "other", "namespace": "default", "uid": "o"}}, ResourceClaim)
    assert claims.observe(other, 4.0).publications == []  # no pod names it


def test_a_list_attribute_travels_in_the_slice_whole_and_is_no_problem() -> None:
    body = msgspec.json.decode(msgspec.json.encode(SLICE))
    body["spec"]["devices"][0]["attributes"]["resource.kubernetes.io/numaNode"] = {"ints": [0, 1]}
    event = slice_tracker().observe(msgspec.convert(body, ResourceSlice), 5.0)
    (publication,) = event.publications
    assert isinstance(publication.event, ResourceSliceEvent)
    assert "resource.kubernetes.io/numaNode" not in publication.event.devices[0].attributes
    assert publication.event.spec is not None
    assert publication.event.spec.devices[0].attributes["resource.kubernetes.io/numaNode"].ints == (0, 1)
    assert [p.field for p in event.problems] == ["spec.devices[gpu-0].attributes[odd]"]
