"""status.allocation for one claim from the devices the search chose; pure.

As upstream writes it: a result per device (`request` is `<request>/<subrequest>` for
a subrequest, `adminAccess` set only when asked, the request's tolerations); the
config of each device class used, once per class with the requests that use it
(source FromClass), then the claim's own config for the requests it names (source
FromClaim); a config that names every request names none (empty means all). The node
selector: the node of the first node-local device, else the union of the slices' node
selectors, else none (the devices are reachable from every node). A device with
`bindsToNode` (read with DRADeviceBindingConditions) overrides all of that: the claim
stays on the node it was allocated for, whatever its slices select.
"""

from __future__ import annotations

from fractions import Fraction

import msgspec

from engine.node.dra.capacity import quantity_text
from engine.node.dra.model import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
)
from engine.node.dra.pools import NODE_NAME_FIELD
from engine.node.dra.requests import AllocationError, Candidate, RequestData


class Chosen(msgspec.Struct, frozen=True, kw_only=True):
    data: RequestData
    candidate: Candidate
    share_id: str | None = None  # one share of a device that allows multiple allocations
    consumed: dict[str, Fraction] = {}  # its consumedCapacity


def _device_result(chosen: Chosen) -> DeviceRequestAllocationResult:
    d = chosen.data
    return DeviceRequestAllocationResult(
        request=d.name,
        driver=chosen.candidate.driver,
        pool=chosen.candidate.pool.name,
        device=chosen.candidate.device.name,
        admin_access=True if d.admin_access else None,
        tolerations=d.tolerations,
        share_id=chosen.share_id,
        consumed_capacity={name: quantity_text(value) for name, value in sorted(chosen.consumed.items())},
        # copied for the binder, which binds the pod only once the driver reports them True
        binding_conditions=chosen.candidate.device.binding_conditions,
        binding_failure_conditions=chosen.candidate.device.binding_failure_conditions,
    )


def _configs(
    claim: ResourceClaim,
    claim_index: int,
    entries: dict[tuple[int, int], list[RequestData]],
    selected: dict[tuple[int, int], int],
) -> list[DeviceAllocationConfiguration]:
    configs: list[DeviceAllocationConfiguration] = []
    by_class: dict[str, range] = {}
    chosen: list[RequestData] = []
    for r in range(len(claim.spec.devices.requests)):
        options = entries[(claim_index, r)]
        data = options[selected.get((claim_index, r), 0)] if options[0].sub_request else options[0]
        chosen.append(data)
        name = data.device_class.metadata.name
        if name in by_class:
            for i in by_class[name]:
                configs[i] = msgspec.structs.replace(configs[i], requests=(*configs[i].requests, data.name))
            continue
        start = len(configs)
        for class_config in data.device_class.spec.config:
            configs.append(
                DeviceAllocationConfiguration(source="FromClass", requests=(data.name,), opaque=class_config.opaque)
            )
        by_class[name] = range(start, len(configs))
    for config in claim.spec.devices.config:
        names = set(config.requests)
        if not names or any(d.request in names or (d.sub_request and d.name in names) for d in chosen):
            configs.append(
                DeviceAllocationConfiguration(source="FromClaim", requests=config.requests, opaque=config.opaque)
            )
    total = len(claim.spec.devices.requests)
    return [msgspec.structs.replace(c, requests=()) if len(c.requests) == total else c for c in configs]


def _on_node(node_name: str) -> NodeSelector:
    term = NodeSelectorTerm(
        match_fields=(NodeSelectorRequirement(key=NODE_NAME_FIELD, operator="In", values=(node_name,)),)
    )
    return NodeSelector(node_selector_terms=(term,))


def _node_selector(results: list[Chosen], bound_node: str | None) -> NodeSelector | None:
    if bound_node is not None and any(c.candidate.device.binds_to_node for c in results):
        return _on_node(bound_node)
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for chosen in results:
        spec = chosen.candidate.slice.spec
        device = chosen.candidate.device
        node_name, selector = (
            (device.node_name, device.node_selector)
            if spec.per_device_node_selection
            else (spec.node_name, spec.node_selector)
        )
        if node_name is not None:
            return _on_node(node_name)
        if selector is None or not selector.node_selector_terms:
            continue
        if len(selector.node_selector_terms) > 1:
            raise AllocationError(
                f"unsupported ResourceSlice.NodeSelector with {len(selector.node_selector_terms)} terms"
            )
        term = selector.node_selector_terms[0]
        fields.extend(r for r in term.match_fields if r not in fields)
        expressions.extend(r for r in term.match_expressions if r not in expressions)
    if not fields and not expressions:
        return None
    term = NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields))
    return NodeSelector(node_selector_terms=(term,))


def allocation_result(
    claim: ResourceClaim,
    claim_index: int,
    results: list[Chosen],
    entries: dict[tuple[int, int], list[RequestData]],
    selected: dict[tuple[int, int], int],
    bound_node: str | None = None,
) -> AllocationResult:
    """`bound_node`: the node allocated for, when devices' bindsToNode is read (else None)."""
    return AllocationResult(
        devices=DeviceAllocationResult(
            results=tuple(_device_result(c) for c in results),
            config=tuple(_configs(claim, claim_index, entries, selected)),
        ),
        node_selector=_node_selector(results, bound_node),
    )
