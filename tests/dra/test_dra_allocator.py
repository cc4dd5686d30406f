"""The structured allocator on tables from the DRA API's semantics and upstream's allocator tests."""

from __future__ import annotations

import pytest
from dra_builders import DRIVER, attrs, claim, device, device_class, exact, picked, run, slice_

from engine.node.dra import AllocationError, NodeView


def test_one_device_for_one_request_and_the_node_is_in_the_allocation() -> None:
    results = run([claim([exact("req")])], [slice_([device("d0")])])
    assert picked(results) == [[("req", "d0")]]
    assert results is not None
    result = results[0]
    assert result.devices.results[0].driver == DRIVER and result.devices.results[0].pool == "pool-1"
    term = result.node_selector.node_selector_terms[0] if result.node_selector else None
    assert term is not None and term.match_fields[0].values == ("node-1",)


def test_no_slices_no_allocation() -> None:
    assert run([claim([exact("req")])], []) is None


def test_an_allocated_device_is_never_given_again() -> None:
    slices = [slice_([device("d0"), device("d1")])]
    assert picked(run([claim([exact("req")])], slices, allocated=frozenset({(DRIVER, "pool-1", "d0")}))) == [
        [("req", "d1")]
    ]
    taken = frozenset({(DRIVER, "pool-1", "d0"), (DRIVER, "pool-1", "d1")})
    assert run([claim([exact("req")])], slices, allocated=taken) is None


def test_two_claims_of_one_pod_get_different_devices() -> None:
    claims = [claim([exact("req")], name="a"), claim([exact("req")], name="b")]
    assert picked(run(claims, [slice_([device("d0"), device("d1")])])) == [[("req", "d0")], [("req", "d1")]]
    assert run(claims, [slice_([device("d0")])]) is None


def test_exact_count_needs_that_many_devices() -> None:
    assert run([claim([exact("req", 2)])], [slice_([device("d0")])]) is None
    assert picked(run([claim([exact("req", 2)])], [slice_([device("d0"), device("d1")])])) == [
        [("req", "d0"), ("req", "d1")]
    ]


def test_all_takes_every_selected_device_and_fails_on_an_incomplete_pool() -> None:
    devices = [device("d0", attributes=attrs(kind="gpu")), device("d1", attributes=attrs(kind="nic"))]
    selector = 'device.attributes["gpu.example.com"].kind == "gpu"'
    request = exact("req", 1, "gpu", selector, allocationMode="All")
    assert picked(run([claim([request])], [slice_(devices)])) == [[("req", "d0")]]
    with pytest.raises(AllocationError, match="asks for all devices, but resource pool .* is currently being updated"):
        run([claim([request])], [slice_(devices, count=2)])
    assert run([claim([exact("req", 1, "gpu", "false", allocationMode="All")])], [slice_(devices)]) is None


def test_all_with_a_device_in_use_has_no_solution() -> None:
    request = exact("req", allocationMode="All")
    taken = frozenset({(DRIVER, "pool-1", "d1")})
    assert run([claim([request])], [slice_([device("d0"), device("d1")])], allocated=taken) is None


def test_backtracking_across_requests() -> None:
    """The first request takes d0 first; the second can only use d0: the search moves the first to d1."""
    requests = [exact("any"), exact("only-d0", 1, "gpu", 'device.attributes["gpu.example.com"].name == "zero"')]
    devices = [device("d0", attributes=attrs(name="zero")), device("d1", attributes=attrs(name="one"))]
    assert picked(run([claim(requests)], [slice_(devices)])) == [[("any", "d1"), ("only-d0", "d0")]]


def test_backtracking_across_claims() -> None:
    only_d0 = exact("req", 1, "gpu", 'device.attributes["gpu.example.com"].name == "zero"')
    claims = [claim([exact("req")], name="a"), claim([only_d0], name="b")]
    devices = [device("d0", attributes=attrs(name="zero")), device("d1", attributes=attrs(name="one"))]
    assert picked(run(claims, [slice_(devices)])) == [[("req", "d1")], [("req", "d0")]]


def test_match_attribute_backtracks_to_devices_sharing_the_value() -> None:
    devices = [
        device("d0", attributes=attrs(numa=0)),
        device("d1", attributes=attrs(numa=1)),
        device("d2", attributes=attrs(numa=1)),
    ]
    constraint = [{"matchAttribute": "gpu.example.com/numa"}]
    assert picked(run([claim([exact("req", 2)], constraint)], [slice_(devices)])) == [[("req", "d1"), ("req", "d2")]]
    assert run([claim([exact("req", 3)], constraint)], [slice_(devices)]) is None


def test_match_attribute_across_two_requests_and_a_device_without_the_attribute() -> None:
    nics = slice_(
        [device("n0"), device("n1", attributes={"resource.kubernetes.io/pcieRoot": {"string": "a"}})],
        driver="nic.example.com",
        pool="nics",
    )
    classes = [
        device_class("gpu", ('device.driver == "gpu.example.com"',)),
        device_class("nic", ('device.driver == "nic.example.com"',)),
    ]
    constraint = [{"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    gpus = slice_([device("g0", attributes={"resource.kubernetes.io/pcieRoot": {"string": "a"}})], pool="gpus")
    found = run([claim([exact("gpu", 1, "gpu"), exact("nic", 1, "nic")], constraint)], [gpus, nics], classes)
    assert picked(found) == [[("gpu", "g0"), ("nic", "n1")]]


def test_distinct_attribute_gives_devices_with_different_values() -> None:
    devices = [
        device("d0", attributes=attrs(root="a")),
        device("d1", attributes=attrs(root="a")),
        device("d2", attributes=attrs(root="b")),
    ]
    constraint = [{"distinctAttribute": "gpu.example.com/root"}]
    assert picked(run([claim([exact("req", 2)], constraint)], [slice_(devices)])) == [[("req", "d0"), ("req", "d2")]]
    assert run([claim([exact("req", 3)], constraint)], [slice_(devices)]) is None


def test_first_available_takes_the_first_subrequest_that_fits_and_its_config() -> None:
    request = {
        "name": "req",
        "firstAvailable": [
            {"name": "two", "deviceClassName": "gpu", "count": 2},
            {"name": "one", "deviceClassName": "gpu", "count": 1},
        ],
    }
    config = [
        {"requests": ["req/one"], "opaque": {"driver": DRIVER, "parameters": {"sharing": "mps"}}},
        {"requests": ["req/two"], "opaque": {"driver": DRIVER, "parameters": {"sharing": "none"}}},
    ]
    results = run([claim([request], config=config)], [slice_([device("d0")])])
    assert picked(results) == [[("req/one", "d0")]]
    assert results is not None
    (copied,) = results[0].devices.config
    assert copied.source == "FromClaim" and copied.opaque is not None
    assert copied.opaque.parameters == {"sharing": "mps"}
    assert picked(run([claim([request])], [slice_([device("d0"), device("d1")])])) == [
        [("req/two", "d0"), ("req/two", "d1")]
    ]


def test_a_tainted_device_is_allocated_only_with_a_toleration() -> None:
    taint = {"key": "broken", "value": "ecc", "effect": "NoSchedule"}
    slices = [slice_([device("d0", taints=[taint]), device("d1", taints=[{**taint, "effect": "None"}])])]
    assert picked(run([claim([exact("req")])], slices)) == [[("req", "d1")]]
    assert run([claim([exact("req", 2)])], slices) is None
    tolerated = exact("req", 2, tolerations=[{"key": "broken", "operator": "Exists"}])
    results = run([claim([tolerated])], slices)
    assert picked(results) == [[("req", "d0"), ("req", "d1")]]
    assert results is not None and results[0].devices.results[0].tolerations[0].key == "broken"
    wrong_value = exact("req", 2, tolerations=[{"key": "broken", "value": "other", "effect": "NoSchedule"}])
    assert run([claim([wrong_value])], slices) is None
    no_execute = [slice_([device("d0", taints=[{**taint, "effect": "NoExecute"}])])]
    assert run([claim([exact("req")])], no_execute) is None


def test_incomplete_pools_and_generations() -> None:
    incomplete = [slice_([device("d0")], count=2)]
    assert run([claim([exact("req")])], incomplete) is None
    second = slice_([device("d1")], count=2, node="node-2", name="other")
    assert picked(run([claim([exact("req")])], [*incomplete, second])) == [[("req", "d0")]]
    old = slice_([device("old")], generation=1, name="old")
    new = slice_([device("new")], generation=2, name="new")
    assert picked(run([claim([exact("req")])], [old, new])) == [[("req", "new")]]
    assert picked(run([claim([exact("req", 2)])], [new, old])) is None


def test_a_pool_with_a_device_twice_is_invalid() -> None:
    slices = [slice_([device("d0")], count=2, name="a"), slice_([device("d0")], count=2, name="b")]
    with pytest.raises(AllocationError, match="invalid resource pools were encountered"):
        run([claim([exact("req")])], slices)


def test_slice_node_selection() -> None:
    assert run([claim([exact("req")])], [slice_([device("d0")], node="node-2")]) is None
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    results = run([claim([exact("req")])], [slice_([device("d0")], node=None, nodeSelector=selector)])
    assert results is not None and results[0].node_selector is not None
    assert results[0].node_selector.node_selector_terms[0].match_expressions[0].key == "zone"
    assert (
        run(
            [claim([exact("req")])], [slice_([device("d0")], node=None, nodeSelector=selector)], node=NodeView(name="x")
        )
        is None
    )
    everywhere = run([claim([exact("req")])], [slice_([device("d0")], node=None, allNodes=True)])
    assert everywhere is not None and everywhere[0].node_selector is None
    per_device = slice_(
        [device("d0", nodeName="node-2"), device("d1", nodeName="node-1")], node=None, perDeviceNodeSelection=True
    )
    assert picked(run([claim([exact("req")])], [per_device])) == [[("req", "d1")]]


def test_device_class_selectors_and_a_missing_class() -> None:
    devices = [device("d0", attributes=attrs(kind="nic")), device("d1", attributes=attrs(kind="gpu"))]
    gpu = device_class("gpu", ('device.attributes["gpu.example.com"].kind == "gpu"',))
    assert picked(run([claim([exact("req")])], [slice_(devices)], [gpu])) == [[("req", "d1")]]
    with pytest.raises(AllocationError, match='could not retrieve device class tpu: .*"tpu" not found'):
        run([claim([exact("req", 1, "tpu")])], [slice_(devices)], [gpu])


def test_config_from_class_and_claim_in_order_with_their_requests() -> None:
    cls_config = [{"opaque": {"driver": DRIVER, "parameters": {"from": "class"}}}]
    classes = [device_class("gpu", config=cls_config), device_class("other")]
    config = [{"opaque": {"driver": DRIVER, "parameters": {"from": "claim"}}}]
    requests = [exact("a"), exact("b"), exact("c", 1, "other")]
    results = run([claim(requests, config=config)], [slice_([device("d0"), device("d1"), device("d2")])], classes)
    assert results is not None
    configs = results[0].devices.config
    assert [(c.source, c.requests) for c in configs] == [("FromClass", ("a", "b")), ("FromClaim", ())]


def test_admin_access_uses_a_device_in_use_and_says_so() -> None:
    taken = frozenset({(DRIVER, "pool-1", "d0")})
    results = run([claim([exact("req", adminAccess=True)])], [slice_([device("d0")])], allocated=taken)
    assert picked(results) == [[("req", "d0")]]
    assert results is not None and results[0].devices.results[0].admin_access is True


def test_selector_errors_name_the_claim_or_class_and_the_expression() -> None:
    with pytest.raises(
        AllocationError, match=r"claim default/claim-1: selector #0 'device.attributes\[\"x\"\].y == 1'"
    ):
        run([claim([exact("req", 1, "gpu", 'device.attributes["x"].y == 1')])], [slice_([device("d0")])])
    with pytest.raises(AllocationError, match="class gpu: selector #0 '1 \\+'.*CEL compile error"):
        run([claim([exact("req")])], [slice_([device("d0")])], [device_class("gpu", ("1 +",))])


def test_an_empty_constraint_and_too_many_devices_are_errors() -> None:
    with pytest.raises(AllocationError, match="constraint #0: empty constraint"):
        run([claim([exact("req")], [{"requests": ["req"]}])], [slice_([device("d0")])])
    with pytest.raises(AllocationError, match="number of requested devices 33 exceeds the claim limit of 32"):
        run([claim([exact("req", 33)])], [slice_([device("d0")])])


def test_a_search_without_solution_ends_within_its_bound_with_a_clear_error() -> None:
    """11 devices with distinct a and distinct b, where no 11 exist (a matching of at most 10), though 14
    values of each are offered: no cheap bound sees it, and the search would run for ages."""
    pairs = [(a, b) for a in range(5) for b in range(5, 14)] + [(a, b) for a in range(5, 14) for b in range(5)]
    devices = [device(f"d{i}", attributes=attrs(a=a, b=b)) for i, (a, b) in enumerate(pairs)]
    constraints = [{"distinctAttribute": "gpu.example.com/a"}, {"distinctAttribute": "gpu.example.com/b"}]
    with pytest.raises(AllocationError, match="allocation search aborted after 5000 steps without a solution"):
        run([claim([exact("req", 11)], constraints)], [slice_(devices)], max_steps=5000)
    assert picked(run([claim([exact("req", 10)], constraints)], [slice_(devices)])) is not None


def test_devices_of_one_request_are_tried_as_sets_not_orderings() -> None:
    """Eight cliques of eight with one device taken in each but the last: the answer is the last clique,
    found without walking every ordering of the devices of the cliques that cannot serve."""
    devices = [device(f"d{i:02d}", attributes=attrs(clique=i // 8)) for i in range(64)]
    taken = frozenset((DRIVER, "pool-1", f"d{i:02d}") for i in range(0, 56, 8))
    constraint = [{"matchAttribute": "gpu.example.com/clique"}]
    found = run([claim([exact("req", 8)], constraint)], [slice_(devices)], allocated=taken, max_steps=500)
    assert picked(found) == [[("req", f"d{i}") for i in range(56, 64)]]


def test_counters_of_a_partitionable_device_are_shared() -> None:
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}}}]
    half = [{"counterSet": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}]
    parts = [device(f"p{i}", consumesCounters=half) for i in range(3)]
    slices = [slice_(parts, sharedCounters=counters)]
    assert picked(run([claim([exact("req", 2)])], slices)) == [[("req", "p0"), ("req", "p1")]]
    assert run([claim([exact("req", 3)])], slices) is None
    taken = frozenset({(DRIVER, "pool-1", "p2")})
    assert picked(run([claim([exact("req")])], slices, allocated=taken)) == [[("req", "p0")]]
    assert run([claim([exact("req", 2)])], slices, allocated=taken) is None


def test_a_score_picks_the_best_of_the_valid_allocations() -> None:
    """Without a score the first solution stands (d0, d1); with one, the best pair (d2, d3)."""
    slices = [slice_([device(f"d{i}") for i in range(4)])]
    linked = {frozenset({"d2", "d3"}): 100.0}

    def score(devices: list[tuple[str, str, str]]) -> float:
        return linked.get(frozenset(d[2] for d in devices), 0.0)

    assert picked(run([claim([exact("req", 2)])], slices)) == [[("req", "d0"), ("req", "d1")]]
    assert picked(run([claim([exact("req", 2)])], slices, score=score)) == [[("req", "d2"), ("req", "d3")]]


def test_all_devices_that_break_a_constraint_are_an_error() -> None:
    devices = [device("d0", attributes=attrs(numa=0)), device("d1", attributes=attrs(numa=1))]
    request = exact("req", allocationMode="All")
    with pytest.raises(
        AllocationError, match="cannot add device .*d1 because a claim constraint would not be satisfied"
    ):
        run([claim([request], [{"matchAttribute": "gpu.example.com/numa"}])], [slice_(devices)])


def test_a_subrequest_that_would_pass_the_claim_limit_gives_way_to_the_next() -> None:
    request = {
        "name": "req",
        "firstAvailable": [
            {"name": "many", "deviceClassName": "gpu", "count": 40},
            {"name": "one", "deviceClassName": "gpu", "count": 1},
        ],
    }
    assert picked(run([claim([request])], [slice_([device(f"d{i}") for i in range(40)])])) == [[("req/one", "d0")]]


def test_first_available_backtracks_when_a_later_request_needs_the_device() -> None:
    """The first subrequest takes the one big GPU the next request must have: the second subrequest is used."""
    classes = [
        device_class("gpu"),
        device_class("big", ('device.attributes["gpu.example.com"].size == "big"',)),
    ]
    request = {
        "name": "main",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "big"},
            {"name": "small", "deviceClassName": "gpu"},
        ],
    }
    devices = [device("d0", attributes=attrs(size="big")), device("d1", attributes=attrs(size="small"))]
    found = run([claim([request, exact("needs-big", 1, "big")])], [slice_(devices)], classes)
    assert picked(found) == [[("main/small", "d1"), ("needs-big", "d0")]]


def test_a_constraint_may_name_a_subrequest() -> None:
    request = {"name": "req", "firstAvailable": [{"name": "two", "deviceClassName": "gpu", "count": 2}]}
    devices = [device("d0", attributes=attrs(numa=0)), device("d1", attributes=attrs(numa=1))]
    devices.append(device("d2", attributes=attrs(numa=1)))
    constraint = [{"requests": ["req/two"], "matchAttribute": "gpu.example.com/numa"}]
    assert picked(run([claim([request], constraint)], [slice_(devices)])) == [[("req/two", "d1"), ("req/two", "d2")]]


def test_the_node_selector_of_network_attached_devices_is_the_union_of_their_slices() -> None:
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Exists"}]}]}
    node = NodeView(name="node-1", labels={"zone": "a", "rack": "r1"})
    slices = [
        slice_([device("d0")], pool="p0", node=None, nodeSelector=zone),
        slice_([device("d1")], pool="p1", node=None, nodeSelector=rack),
    ]
    results = run([claim([exact("req", 2)])], slices, node=node)
    assert results is not None and results[0].node_selector is not None
    (term,) = results[0].node_selector.node_selector_terms
    assert [r.key for r in term.match_expressions] == ["zone", "rack"]


def test_admin_access_never_takes_a_device_twice_in_one_claim() -> None:
    requests = [exact("a", adminAccess=True), exact("b", adminAccess=True)]
    assert run([claim(requests)], [slice_([device("d0")])]) is None
    assert picked(run([claim(requests)], [slice_([device("d0"), device("d1")])])) == [[("a", "d0"), ("b", "d1")]]
