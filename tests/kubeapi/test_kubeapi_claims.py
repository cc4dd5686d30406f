"""ResourceClaims: the controller's claims from templates, and the status rules a scheduler meets."""

from __future__ import annotations

from typing import Any

import pytest
from kubeapi_support import CoreApi, CustomApi, pod_body, status_of
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from topoplace.dev.kubeapi import KubeApiServer
from topoplace.dev.kubeapi.controllers import POD_CLAIM_NAME_ANNOTATION, claim_name_base

TEMPLATE: dict[str, Any] = {
    "metadata": {"name": "one-gpu"},
    "spec": {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
    },
}
PROTECTION = "resource.kubernetes.io/delete-protection"


def pod_with_claims(name: str, *claims: dict[str, str]) -> dict[str, Any]:
    return pod_body(name, resourceClaims=list(claims))


def allocation(device: str = "gpu-0") -> dict[str, Any]:
    return {
        "devices": {"results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n1", "device": device}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        },
    }


def consumer(i: int) -> dict[str, str]:
    return {"resource": "pods", "name": f"p{i}", "uid": f"00000000-0000-0000-0000-{i:012d}"}


async def test_a_pod_with_a_claim_template_gets_its_claim(core: CoreApi, dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim_template("team-a", TEMPLATE)
    await dra.create_namespaced_resource_claim("team-a", {"metadata": {"name": "shared"}, "spec": {}})
    pod = await core.create_namespaced_pod(
        "team-a",
        pod_with_claims(
            "trainer",
            {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
            {"name": "existing", "resourceClaimName": "shared"},
        ),
    )
    claims = (await dra.list_namespaced_resource_claim("team-a")).items
    generated = [c for c in claims if c.metadata.name != "shared"]
    assert len(generated) == 1
    claim = generated[0]
    assert claim.metadata.name.startswith("trainer-gpu-") and len(claim.metadata.name) == len("trainer-gpu-") + 5
    assert claim.metadata.annotations == {POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert claim.metadata.labels == {"team": "a"}
    owner = claim.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Pod", "trainer", pod.metadata.uid, True)
    assert claim.spec.devices.requests[0].exactly.device_class_name == "gpu.example.com"
    statuses = (await core.read_namespaced_pod("trainer", "team-a")).status.resource_claim_statuses
    assert [(s.name, s.resource_claim_name) for s in statuses] == [("gpu", claim.metadata.name)]


async def test_a_template_created_later_is_picked_up(core: CoreApi, dra: CustomApi) -> None:
    await core.create_namespaced_pod(
        "default", pod_with_claims("early", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"})
    )
    assert (await dra.list_namespaced_resource_claim("default")).items == []
    await dra.create_namespaced_resource_claim_template("default", TEMPLATE)
    claims = (await dra.list_namespaced_resource_claim("default")).items
    assert [c.metadata.annotations[POD_CLAIM_NAME_ANNOTATION] for c in claims] == ["gpu"]


async def test_deleting_the_pod_deletes_its_claims_unless_finalized(core: CoreApi, dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim_template("default", TEMPLATE)
    await core.create_namespaced_pod(
        "default", pod_with_claims("a", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"})
    )
    await core.create_namespaced_pod(
        "default", pod_with_claims("b", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"})
    )
    claims = {
        c.metadata.owner_references[0].name: c.metadata.name
        for c in (await dra.list_namespaced_resource_claim("default")).items
    }
    await dra.patch_namespaced_resource_claim(claims["b"], "default", {"metadata": {"finalizers": [PROTECTION]}})
    await core.delete_namespaced_pod("a", "default")
    await core.delete_namespaced_pod("b", "default")
    left = (await dra.list_namespaced_resource_claim("default")).items
    assert [c.metadata.name for c in left] == [claims["b"]]
    assert left[0].metadata.deletion_timestamp is not None


async def test_the_claim_controller_can_be_switched_off() -> None:
    async with KubeApiServer(claim_controller=False) as server:
        server.store.create("resourceclaimtemplates.resource.k8s.io", TEMPLATE, namespace="default")
        server.store.create("pods", pod_with_claims("p", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))
        assert server.store.list("resourceclaims.resource.k8s.io")[0] == []


def test_long_names_are_cut_in_proportion_as_the_real_controller_does() -> None:
    assert claim_name_base("trainer", "gpu") == "trainer-gpu-"
    # 60 and 20 characters of an 82-character base, each cut to its share of 57: 41 and 13
    assert claim_name_base("p" * 60, "c" * 20) == "p" * 41 + "-" + "c" * 13


async def test_allocation_and_reservation_through_status(dra: CustomApi) -> None:
    created = await dra.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "c", "finalizers": [PROTECTION]}, "spec": TEMPLATE["spec"]["spec"]}
    )
    ignored = await dra.patch_namespaced_resource_claim("c", "default", {"status": {"allocation": allocation()}})
    assert ignored.status is None  # the main resource does not write status
    with pytest.raises(ApiException) as err:  # reservedFor needs an allocation
        await dra.patch_namespaced_resource_claim_status("c", "default", {"status": {"reservedFor": [consumer(1)]}})
    assert (
        err.value.status == 422
        and "may not be specified when `allocated` is not set" in status_of(err.value)["message"]
    )
    allocated = await dra.patch_namespaced_resource_claim_status(
        "c", "default", {"status": {"allocation": allocation(), "reservedFor": [consumer(1)]}}
    )
    assert allocated.status.allocation.devices.results[0].device == "gpu-0"
    assert int(allocated.metadata.resource_version) > int(created.metadata.resource_version)
    more = await dra.patch_namespaced_resource_claim_status("c", "default", {"status": {"reservedFor": [consumer(2)]}})
    assert [r.name for r in more.status.reserved_for] == ["p1", "p2"]  # strategic merge by uid
    with pytest.raises(ApiException) as err:  # the allocation cannot change while set
        await dra.patch_namespaced_resource_claim_status(
            "c", "default", {"status": {"allocation": allocation("gpu-1")}}
        )
    assert err.value.status == 422
    assert status_of(err.value)["message"].startswith(
        'ResourceClaim.resource.k8s.io "c" is invalid: status.allocation: Invalid value: field is immutable'
    )
    with pytest.raises(ApiException) as err:  # nor be cleared while reserved
        await dra.patch_namespaced_resource_claim_status(
            "c", "default", {"status": {"allocation": None}}, _content_type="application/merge-patch+json"
        )
    assert err.value.status == 422
    cleared = await dra.patch_namespaced_resource_claim_status(
        "c",
        "default",
        {"status": {"allocation": None, "reservedFor": None}},
        _content_type="application/merge-patch+json",
    )
    assert cleared.status is None or cleared.status.allocation is None


async def test_reserved_for_holds_at_most_256(dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim("default", {"metadata": {"name": "c"}, "spec": TEMPLATE["spec"]["spec"]})
    full = {"status": {"allocation": allocation(), "reservedFor": [consumer(i) for i in range(256)]}}
    await dra.patch_namespaced_resource_claim_status("c", "default", full)
    with pytest.raises(ApiException) as err:
        await dra.patch_namespaced_resource_claim_status("c", "default", {"status": {"reservedFor": [consumer(256)]}})
    assert err.value.status == 422
    assert "status.reservedFor: Too many: 257: must have at most 256 items" in status_of(err.value)["message"]


async def test_stale_status_replace_is_409(kube_client: client.ApiClient, dra: CustomApi) -> None:
    claim = await dra.create_namespaced_resource_claim("default", {"metadata": {"name": "c"}, "spec": {}})
    await dra.patch_namespaced_resource_claim("c", "default", {"metadata": {"labels": {"x": "1"}}})
    body = kube_client.sanitize_for_serialization(claim)
    body["status"] = {"allocation": allocation()}
    with pytest.raises(ApiException) as err:
        await dra.replace_namespaced_resource_claim_status("c", "default", body)
    assert err.value.status == 409


async def test_an_allocation_must_name_a_request_of_the_claim(dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim("default", {"metadata": {"name": "c"}, "spec": TEMPLATE["spec"]["spec"]})
    bad = allocation()
    bad["devices"]["results"][0]["request"] = "nic"
    with pytest.raises(ApiException) as err:
        await dra.patch_namespaced_resource_claim_status("c", "default", {"status": {"allocation": bad}})
    assert err.value.status == 422 and "results[0].request" in status_of(err.value)["message"]


async def test_no_new_consumers_once_the_claim_is_being_deleted(dra: CustomApi) -> None:
    await dra.create_namespaced_resource_claim(
        "default", {"metadata": {"name": "c", "finalizers": [PROTECTION]}, "spec": TEMPLATE["spec"]["spec"]}
    )
    await dra.patch_namespaced_resource_claim_status(
        "c", "default", {"status": {"allocation": allocation(), "reservedFor": [consumer(1)]}}
    )
    await dra.delete_namespaced_resource_claim("c", "default")
    with pytest.raises(ApiException) as err:
        await dra.patch_namespaced_resource_claim_status("c", "default", {"status": {"reservedFor": [consumer(2)]}})
    assert err.value.status == 422 and "new entries may not be added" in status_of(err.value)["message"]
