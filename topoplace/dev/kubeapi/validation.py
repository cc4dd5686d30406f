"""What the real server checks or defaults on create and update, per resource type (pure)."""

from __future__ import annotations

import re
from typing import Any

from topoplace.dev.kubeapi import dra, resources
from topoplace.dev.kubeapi.errors import ApiError, invalid
from topoplace.dev.kubeapi.resources import ResourceType

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")

# The pod spec fields an update may change (everything else is immutable once created).
_MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds")


def check_name(rtype: ResourceType, name: str) -> None:
    if not name:
        raise invalid(rtype.kind, "", "metadata.name", "Required value: name or generateName is required")
    if not _DNS_SUBDOMAIN.match(name):
        raise invalid(
            rtype.kind,
            name,
            "metadata.name",
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )


def validate(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Raise 422 Invalid naming the first missing or bad required field."""
    name = obj["metadata"]["name"]
    if rtype is resources.PODS:
        containers = (obj.get("spec") or {}).get("containers")
        if not isinstance(containers, list) or not containers:
            raise invalid(rtype.kind, name, "spec.containers", "Required value")
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                raise invalid(rtype.kind, name, f"spec.containers[{i}].name", "Required value")
            if not c.get("image"):
                raise invalid(rtype.kind, name, f"spec.containers[{i}].image", "Required value")
    elif rtype is resources.HYPERNODES:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            raise invalid(rtype.kind, name, "spec", "Required value")
        if not isinstance(spec.get("tier"), int) or isinstance(spec.get("tier"), bool):
            raise invalid(rtype.kind, name, "spec.tier", "Required value: an integer")
        for i, member in enumerate(spec.get("members") or []):
            if not isinstance(member, dict) or member.get("type") not in ("Node", "HyperNode"):
                got = member.get("type") if isinstance(member, dict) else member
                raise invalid(
                    rtype.kind,
                    name,
                    f"spec.members[{i}].type",
                    f'Unsupported value: "{got}": supported values: "Node", "HyperNode"',
                )
    elif rtype is resources.EVENTS_V1:
        for field in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
            if not obj.get(field):
                raise invalid(rtype.kind, name, field, "Required value")
    elif rtype is resources.TOPOLOGIES:
        _validate_topology(rtype, name, obj.get("spec"))
    elif rtype is resources.PODGROUPS:
        min_member = (obj.get("spec") or {}).get("minMember", 0)
        if not isinstance(min_member, int) or isinstance(min_member, bool) or min_member < 0:
            raise invalid(rtype.kind, name, "spec.minMember", "Invalid value: must be a non-negative integer")
    elif rtype.group == resources.RESOURCECLAIMS.group:
        dra.validate(rtype, obj)


def _validate_topology(rtype: ResourceType, name: str, spec: Any) -> None:
    """Kueue's CRD schema: 1 to 16 levels, each with a nodeLabel, no label twice."""
    levels = spec.get("levels") if isinstance(spec, dict) else None
    if not isinstance(levels, list) or not levels:
        raise invalid(rtype.kind, name, "spec.levels", "Required value")
    if len(levels) > 16:
        raise invalid(rtype.kind, name, "spec.levels", f"Too many: {len(levels)}: must have at most 16 items")
    labels = [level.get("nodeLabel") if isinstance(level, dict) else None for level in levels]
    for i, label in enumerate(labels):
        if not isinstance(label, str) or not label:
            raise invalid(rtype.kind, name, f"spec.levels[{i}].nodeLabel", "Required value")
    if len(set(labels)) != len(labels):
        raise invalid(rtype.kind, name, "spec.levels", "Invalid value: must be unique")
    if "kubernetes.io/hostname" in labels[:-1]:
        raise invalid(
            rtype.kind,
            name,
            "spec.levels",
            "Invalid value: the kubernetes.io/hostname label can only be used at the lowest level of topology",
        )


def prepare_create(rtype: ResourceType, obj: dict[str, Any], now: str) -> None:
    """Defaults the server fills in; status is reset where the real strategy resets it."""
    if rtype is resources.PODS:
        spec = obj["spec"]
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        obj["status"] = {"phase": "Pending"}
        if spec.get("nodeName"):
            obj["status"] = running_status(obj["status"], now)
    elif rtype.has_status and rtype is not resources.NODES:
        # nodes keep the status they are created with (a kubelet registers that way)
        obj.pop("status", None)


def running_status(status: dict[str, Any], now: str) -> dict[str, Any]:
    """What a pod looks like once bound (PodScheduled, as the real server sets it) and a simulated,
    KWOK-style kubelet started it. Conditions merge by `type`: a PodScheduled=False is replaced."""
    started = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {**status, "phase": "Running", "startTime": now, "conditions": merge_conditions(status, started)}


def merge_conditions(status: dict[str, Any], updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The status's conditions with `updates` put in place of those of the same type, others kept."""
    merged = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    at = {c.get("type"): i for i, c in enumerate(merged)}
    for condition in updates:
        if condition["type"] in at:
            merged[at[condition["type"]]] = condition
        else:
            merged.append(condition)
    return merged


def check_update(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    check_finalizers(rtype, old, new)
    if rtype is resources.TOPOLOGIES and (old.get("spec") or {}).get("levels") != (new.get("spec") or {}).get("levels"):
        raise invalid(rtype.kind, new["metadata"]["name"], "spec.levels", "Invalid value: field is immutable")
    if rtype.group == resources.RESOURCECLAIMS.group:
        dra.check_update(rtype, old, new)
    if rtype is not resources.PODS:
        return
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _immutable_pod_spec(old_spec) != _immutable_pod_spec(new_spec):
        raise ApiError(
            422,
            "Invalid",
            f'Pod "{new["metadata"]["name"]}" is invalid: spec: Forbidden: pod updates may not change fields '
            "other than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
            "(only additions to existing tolerations) or `spec.terminationGracePeriodSeconds`",
            name=new["metadata"]["name"],
            kind="Pod",
        )


def check_status_update(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """A write through /status; only the status differs from the old object here."""
    if rtype.group == resources.RESOURCECLAIMS.group:
        dra.check_status_update(rtype, old, new)


def check_finalizers(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """An object being deleted may lose finalizers but gain none, as the real server enforces."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    added = [f for f in new["metadata"].get("finalizers") or [] if f not in (old["metadata"].get("finalizers") or [])]
    if added:
        quoted = " ".join(f'"{f}"' for f in added)  # Go's %q of a []string
        raise invalid(
            rtype.kind,
            new["metadata"]["name"],
            "metadata.finalizers",
            "Forbidden: no new finalizers can be added if the object is being deleted, "
            f"found new finalizers [{quoted}]",
            reason="FieldValueForbidden",
        )


def _immutable_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    rest = {k: v for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
    rest["containers"] = [
        {k: v for k, v in c.items() if k != "image"} for c in spec.get("containers") or [] if isinstance(c, dict)
    ]
    return rest
