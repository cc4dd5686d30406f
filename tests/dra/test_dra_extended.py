"""Extended resources backed by DRA (KEP-5004): which class serves a name, which resources DRA backs on a
node, and the claim kube-scheduler creates for them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from dra_builders import DRIVER, device, picked, run, slice_

from engine.node.dra import DeviceClass
from engine.node.dra.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    IMPLICIT_PREFIX,
    class_mapping,
    dra_backed,
    extended_claim,
)
from schemas.dra import ContainerRequests

GPU = "nvidia.com/gpu"


def klass(name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z") -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    meta = {"name": name, "creationTimestamp": created}
    return msgspec.convert({"metadata": meta, "spec": spec}, DeviceClass)


def test_a_class_serves_its_extended_name_and_its_implicit_one() -> None:
    assert class_mapping([klass("gpu", GPU), klass("nic")]) == {
        GPU: "gpu",
        IMPLICIT_PREFIX + "gpu": "gpu",
        IMPLICIT_PREFIX + "nic": "nic",
    }


def test_of_two_classes_naming_one_resource_the_newer_serves_it_then_the_first_by_name() -> None:
    older, newer = klass("a", GPU, "2026-01-01T00:00:00Z"), klass("b", GPU, "2026-02-01T00:00:00Z")
    assert class_mapping([older, newer])[GPU] == "b"
    assert class_mapping([klass("b", GPU), klass("a", GPU)])[GPU] == "a"


@pytest.mark.parametrize(
    ("asked", "allocatable", "backed"),
    [
        ({GPU: "2"}, {}, (GPU,)),  # no device plugin publishes it there
        ({GPU: "2"}, {GPU: "0"}, (GPU,)),
        ({GPU: "2"}, None, (GPU,)),
        ({GPU: "2"}, {GPU: "8"}, ()),  # the node's device plugin serves it
        ({GPU: "0"}, {}, ()),  # not asked
        ({"example.com/fpga": "1"}, {}, ()),  # no class serves it
        ({GPU: "500m"}, {}, ()),  # not a whole number of devices
        ({GPU: "1", IMPLICIT_PREFIX + "nic": "1", "cpu": "2"}, {GPU: "1"}, (IMPLICIT_PREFIX + "nic",)),
    ],
)
def test_a_resource_is_backed_by_dra_on_a_node_that_does_not_publish_it(
    asked: dict[str, str], allocatable: dict[str, str] | None, backed: tuple[str, ...]
) -> None:
    mapping = class_mapping([klass("gpu", GPU), klass("nic")])
    assert dra_backed(asked, allocatable, mapping) == backed


CONTAINERS = (
    ContainerRequests(name="setup", requests={GPU: "1"}),  # an init container: index 0
    ContainerRequests(name="main", requests={"cpu": "1", GPU: "2", "memory": "1Gi", IMPLICIT_PREFIX + "nic": "1"}),
    ContainerRequests(name="side", requests={"cpu": "1"}),
)


def test_the_claim_has_one_request_per_container_and_resource_named_as_kube_scheduler_names_them() -> None:
    mapping = class_mapping([klass("gpu", GPU), klass("nic")])
    made = extended_claim("team", "trainer", "uid-1", CONTAINERS, (GPU, IMPLICIT_PREFIX + "nic"), mapping)
    assert made is not None
    assert made.generate_name == "trainer-extended-resources-"
    assert made.claim.metadata.annotations == {EXTENDED_CLAIM_ANNOTATION: "true"}
    assert made.claim.metadata.namespace == "team"
    requests = [
        (r.name, r.exactly.device_class_name, r.exactly.count) for r in made.claim.spec.devices.requests if r.exactly
    ]
    # main's sorted requests: cpu, deviceclass.resource.kubernetes.io/nic, memory, nvidia.com/gpu
    assert requests == [
        ("container-0-request-0", "gpu", 1),
        ("container-1-request-1", "nic", 1),
        ("container-1-request-3", "gpu", 2),
    ]
    assert [(m.container_name, m.resource_name, m.request_name) for m in made.request_mappings] == [
        ("setup", GPU, "container-0-request-0"),
        ("main", IMPLICIT_PREFIX + "nic", "container-1-request-1"),
        ("main", GPU, "container-1-request-3"),
    ]
    assert msgspec.to_builtins(made.request_mappings[0]) == {
        "containerName": "setup",
        "resourceName": GPU,
        "requestName": "container-0-request-0",
    }


def test_only_the_resources_backed_on_the_node_are_asked_and_none_is_no_claim() -> None:
    mapping = class_mapping([klass("gpu", GPU), klass("nic")])
    made = extended_claim("team", "trainer", "uid-1", CONTAINERS, (IMPLICIT_PREFIX + "nic",), mapping)
    assert made is not None and [r.name for r in made.claim.spec.devices.requests] == ["container-1-request-1"]
    assert extended_claim("team", "trainer", "uid-1", CONTAINERS[2:], (GPU,), mapping) is None


def test_the_claim_is_allocated_as_any_claim() -> None:
    mapping = class_mapping([klass("gpu", GPU)])
    main = (ContainerRequests(name="main", requests={GPU: "2"}),)
    made = extended_claim("default", "trainer", "uid-1", main, (GPU,), mapping)
    assert made is not None
    devices = [device(f"gpu-{i}") for i in range(3)]
    found = run(
        [made.claim], [slice_(devices)], [klass("gpu", GPU)], allocated=frozenset({(DRIVER, "pool-1", "gpu-0")})
    )
    assert picked(found) == [[("container-0-request-0", "gpu-1"), ("container-0-request-0", "gpu-2")]]
    assert run([made.claim], [slice_(devices[:1])], [klass("gpu", GPU)]) is None
