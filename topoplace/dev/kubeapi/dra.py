"""What the real server checks on the DRA kinds (resource.k8s.io/v1), as its validation does (pure).

Only the checks a scheduler or driver meets are here: required fields, immutable specs, and the
ResourceClaim status rules (reservedFor at most 256 unique consumers and only with an allocation,
an allocation that cannot be changed while set, no new consumers once the claim is being deleted).
"""

from __future__ import annotations

from typing import Any

from topoplace.dev.kubeapi import resources
from topoplace.dev.kubeapi.errors import ApiError, invalid
from topoplace.dev.kubeapi.resources import ResourceType

RESERVED_FOR_MAX = 256  # resource.ResourceClaimReservedForMaxSize
_SLICE_NODE_FIELDS = ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")

Object = dict[str, Any]


def _required(rtype: ResourceType, name: str, field: str, detail: str = "") -> ApiError:
    return invalid(
        rtype.qualified_kind,
        name,
        field,
        f"Required value{': ' + detail if detail else ''}",
        reason="FieldValueRequired",
    )


def _forbidden(rtype: ResourceType, name: str, field: str, detail: str) -> ApiError:
    return invalid(rtype.qualified_kind, name, field, f"Forbidden: {detail}", reason="FieldValueForbidden")


def _immutable(rtype: ResourceType, name: str, field: str) -> ApiError:
    return invalid(rtype.qualified_kind, name, field, "Invalid value: field is immutable")


def validate(rtype: ResourceType, obj: Object) -> None:
    name = obj["metadata"]["name"]
    spec = obj.get("spec")
    if rtype is resources.RESOURCESLICES:
        _validate_slice(rtype, name, spec if isinstance(spec, dict) else {})
    elif rtype is resources.RESOURCECLAIMS:
        _validate_claim_spec(rtype, name, spec if isinstance(spec, dict) else {}, "spec")
    elif rtype is resources.RESOURCECLAIMTEMPLATES:
        inner = spec.get("spec") if isinstance(spec, dict) else None
        _validate_claim_spec(rtype, name, inner if isinstance(inner, dict) else {}, "spec.spec")


def check_update(rtype: ResourceType, old: Object, new: Object) -> None:
    name = new["metadata"]["name"]
    if rtype in (resources.RESOURCECLAIMS, resources.RESOURCECLAIMTEMPLATES):
        if (old.get("spec") or {}) != (new.get("spec") or {}):
            raise _immutable(rtype, name, "spec")
    elif rtype is resources.RESOURCESLICES:
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if (old_spec.get("pool") or {}).get("name") != (new_spec.get("pool") or {}).get("name"):
            raise _immutable(rtype, name, "spec.pool.name")
        for field in ("driver", "nodeName"):
            if old_spec.get(field) != new_spec.get(field):
                raise _immutable(rtype, name, f"spec.{field}")


def check_status_update(rtype: ResourceType, old: Object, new: Object) -> None:
    if rtype is resources.RESOURCECLAIMS:
        _check_claim_status(rtype, old, new)


def _validate_slice(rtype: ResourceType, name: str, spec: Object) -> None:
    if not spec.get("driver"):
        raise _required(rtype, name, "spec.driver")
    if not (spec.get("pool") or {}).get("name"):
        raise _required(rtype, name, "spec.pool.name")
    given = [f for f in _SLICE_NODE_FIELDS if spec.get(f) not in (None, False, "")]
    if len(given) != 1:
        detail = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
        if not given:
            raise _required(rtype, name, "spec", detail)
        raise invalid(rtype.qualified_kind, name, "spec", f"Invalid value: {detail}, but multiple fields are set")


def _validate_claim_spec(rtype: ResourceType, name: str, spec: Object, at: str) -> None:
    requests = (spec.get("devices") or {}).get("requests") or []
    seen: set[str] = set()
    for i, request in enumerate(requests):
        path = f"{at}.devices.requests[{i}]"
        if not isinstance(request, dict) or not request.get("name"):
            raise _required(rtype, name, f"{path}.name")
        if request["name"] in seen:
            raise invalid(
                rtype.qualified_kind,
                name,
                f"{path}.name",
                f'Duplicate value: "{request["name"]}"',
                reason="FieldValueDuplicate",
            )
        seen.add(request["name"])
        kinds = [k for k in ("exactly", "firstAvailable") if request.get(k)]
        if len(kinds) != 1:
            detail = "exactly one of `exactly` or `firstAvailable` is required"
            if not kinds:
                raise _required(rtype, name, path, detail)
            raise invalid(rtype.qualified_kind, name, path, f"Invalid value: {detail}, but multiple fields are set")
        if kinds == ["exactly"] and not request["exactly"].get("deviceClassName"):
            raise _required(rtype, name, f"{path}.exactly.deviceClassName")


def _request_names(claim: Object) -> set[str]:
    names: set[str] = set()
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if isinstance(request, dict) and request.get("name"):
            names.add(request["name"])
            for sub in request.get("firstAvailable") or []:
                if isinstance(sub, dict) and sub.get("name"):
                    names.add(f"{request['name']}/{sub['name']}")
    return names


def _check_claim_status(rtype: ResourceType, old: Object, new: Object) -> None:
    name = new["metadata"]["name"]
    status, old_status = new.get("status") or {}, old.get("status") or {}
    reserved = status.get("reservedFor") or []
    if len(reserved) > RESERVED_FOR_MAX:
        raise invalid(
            rtype.qualified_kind,
            name,
            "status.reservedFor",
            f"Too many: {len(reserved)}: must have at most {RESERVED_FOR_MAX} items",
            reason="FieldValueTooMany",
        )
    uids: set[str] = set()
    for i, ref in enumerate(reserved):
        ref = ref if isinstance(ref, dict) else {}
        for field in ("resource", "name", "uid"):
            if not ref.get(field):
                raise _required(rtype, name, f"status.reservedFor[{i}].{field}")
        if ref["uid"] in uids:
            raise invalid(
                rtype.qualified_kind,
                name,
                f"status.reservedFor[{i}]",
                f'Duplicate value: "{ref["uid"]}"',
                reason="FieldValueDuplicate",
            )
        uids.add(ref["uid"])
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved and allocation is None:
        raise _forbidden(rtype, name, "status.reservedFor", "may not be specified when `allocated` is not set")
    if reserved and new["metadata"].get("deletionTimestamp"):
        before = {r.get("uid") for r in old_status.get("reservedFor") or [] if isinstance(r, dict)}
        if uids - before:
            raise _forbidden(
                rtype,
                name,
                "status.reservedFor",
                "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
            )
    if allocation is not None and old_allocation is not None:
        if allocation != old_allocation:
            raise _immutable(rtype, name, "status.allocation")
    elif allocation is not None:
        _check_allocation(rtype, name, allocation, _request_names(new))


def _check_allocation(rtype: ResourceType, name: str, allocation: Any, request_names: set[str]) -> None:
    results = ((allocation if isinstance(allocation, dict) else {}).get("devices") or {}).get("results") or []
    for i, result in enumerate(results):
        path = f"status.allocation.devices.results[{i}]"
        result = result if isinstance(result, dict) else {}
        for field in ("request", "driver", "pool", "device"):
            if not result.get(field):
                raise _required(rtype, name, f"{path}.{field}")
        if result["request"] not in request_names:
            raise invalid(
                rtype.qualified_kind,
                name,
                f"{path}.request",
                f'Invalid value: "{result["request"]}": must be the name of a request in the claim or the name '
                "of a request and a subrequest separated by '/'",
            )
