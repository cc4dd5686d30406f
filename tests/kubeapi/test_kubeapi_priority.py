"""The Priority admission plugin on pod create, PriorityClasses and PDBs served, delete's uid precondition:
through the real kubernetes-asyncio client, with the real server's words."""

from __future__ import annotations

import pytest
from kubeapi_support import CoreApi, pod_body, status_of
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException


def _class(name: str, value: int, *, default: bool = False, policy: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {"metadata": {"name": name}, "value": value, "globalDefault": default}
    if policy is not None:
        body["preemptionPolicy"] = policy
    return body


@pytest.fixture
def scheduling(kube_client: client.ApiClient) -> client.SchedulingV1Api:
    return client.SchedulingV1Api(kube_client)


async def test_priority_class_name_resolves_priority_and_policy(
    core: CoreApi, scheduling: client.SchedulingV1Api
) -> None:
    await scheduling.create_priority_class(_class("high", 1000, policy="Never"))
    body = pod_body("p")
    body["spec"]["priorityClassName"] = "high"
    pod = await core.create_namespaced_pod("default", body)
    assert (pod.spec.priority, pod.spec.preemption_policy) == (1000, "Never")


async def test_no_class_gets_the_highest_global_default(core: CoreApi, scheduling: client.SchedulingV1Api) -> None:
    await scheduling.create_priority_class(_class("low-default", 10, default=True))
    await scheduling.create_priority_class(_class("high-default", 20, default=True))
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    assert (pod.spec.priority, pod.spec.priority_class_name) == (20, "high-default")
    assert pod.spec.preemption_policy == "PreemptLowerPriority"


async def test_no_class_and_no_default_is_priority_zero(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    assert (pod.spec.priority, pod.spec.preemption_policy) == (0, "PreemptLowerPriority")


async def test_unknown_class_is_forbidden_in_the_plugins_words(core: CoreApi) -> None:
    body = pod_body("p")
    body["spec"]["priorityClassName"] = "nope"
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 403
    status = status_of(err.value)
    assert status["reason"] == "Forbidden"
    assert status["message"] == 'pods "p" is forbidden: no PriorityClass with name nope was found'


async def test_priority_in_spec_that_differs_is_forbidden(core: CoreApi) -> None:
    body = pod_body("p")
    body["spec"]["priority"] = 5
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod("default", body)
    assert err.value.status == 403
    assert "the integer value of priority (5) must not be provided in pod spec" in status_of(err.value)["message"]


async def test_pod_disruption_budgets_are_served(kube_client: client.ApiClient) -> None:
    policy = client.PolicyV1Api(kube_client)
    body = {"metadata": {"name": "keep"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}}
    await policy.create_namespaced_pod_disruption_budget("default", body)
    listed = await policy.list_namespaced_pod_disruption_budget("default")
    assert [b.metadata.name for b in listed.items] == ["keep"]


async def test_delete_with_another_uid_as_precondition_is_409(core: CoreApi) -> None:
    pod = await core.create_namespaced_pod("default", pod_body("p"))
    wrong = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="not-" + pod.metadata.uid))
    with pytest.raises(ApiException) as err:
        await core.delete_namespaced_pod("p", "default", body=wrong)
    assert err.value.status == 409
    assert "Precondition failed: UID in precondition" in status_of(err.value)["message"]
    right = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pod.metadata.uid), grace_period_seconds=30)
    await core.delete_namespaced_pod("p", "default", body=right)
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("p", "default")
    assert gone.value.status == 404
