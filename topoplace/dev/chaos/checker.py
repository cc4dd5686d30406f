"""The independent checker: what must hold in the API server, whatever the services did.

Reads nothing but the API server's objects (pods, nodes, Volcano PodGroups) and judges them:
- every topoplace pod is bound, or carries PodScheduled=False reason Unschedulable with a message
  (else it is `unconverged`: not a violation while the system may still be working on it);
- no device index on a node held whole by one live pod and by another (`device_conflict`);
- no device's cores over 100 (`capacity_exceeded`);
- no node resource requested by its live pods beyond its allocatable (`node_overcommitted`), the rule
  kube-scheduler's NodeResourcesFit and the kubelet's admission keep;
- no gang with some but fewer than minMember members bound while none of the rest is still being
  worked on (`gang_partly_bound`): Kubernetes binds one pod at a time, so a gang whose members are
  being bound, or whose failed member is being placed again, is in flight, not broken; one that
  stays partly bound keeps its pending members unconverged, and a run must converge. A member's
  Unschedulable reason written no later than its gang's first binding is *stale*: it answers an
  earlier decision (the gang did not fit, then capacity freed and it was placed), so the member is
  still in flight, and unconverged, until it is bound or told a newer reason;
- no pod annotated with a device the node does not have, or with another node (`unknown_device`);
  a pod's devices are what the binder's seal says (`schemas/seal.py`, with the run's key), as the
  services read them: a tenant's edit of `topoplace.io/devices` after the bind is no device taken;
  a pod of ours with devices but no valid seal is `bad_annotation`;
- no pod of another scheduler touched: given a node, a PodScheduled condition or an Event by
  topoplace (`foreign_pod_touched`); no other scheduler runs in a chaos cluster;
- no pod of ours bound to a node whose NoSchedule / NoExecute taints it does not tolerate, or whose
  labels its nodeSelector does not match (`bound_against_rules`), judged here by an implementation
  of its own, not the services'.
The verdict is pure: `judge(objects)`; `cluster_read.read_cluster` fetches the objects over plain HTTP.
"""

from __future__ import annotations

import contextlib
import datetime
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

import msgspec

from schemas.annotations import DECISION, DEVICES, NODE, SCHEDULER_NAME, decode_devices
from schemas.events import DeviceAssignment
from schemas.quantity import parse_quantity
from schemas.seal import SEAL, DecisionKey
from services.collector.cluster.gangs import VOLCANO_GROUP_ANNOTATION
from topoplace.dev.chaos.priority_mix import preempted_victims, preemption_violations
from topoplace.dev.demo.cluster import DEVICE_RESOURCE

Obj = dict[str, Any]
VIOLATION_KINDS = (
    "device_conflict",
    "capacity_exceeded",
    "node_overcommitted",
    "gang_partly_bound",
    "unknown_device",
    "bad_annotation",
    "foreign_pod_touched",
    "bound_against_rules",
    "service_dead",
    "preempted_not_lower",
    "wasted_preemption",
)


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    kind: str
    subject: str  # the node, device or gang it is about
    detail: str


class ClusterObjects(msgspec.Struct, frozen=True, kw_only=True):
    pods: tuple[Obj, ...]
    nodes: tuple[Obj, ...]
    podgroups: tuple[Obj, ...] = ()
    slices: tuple[Obj, ...] = ()  # DRA ResourceSlices: a DRA node's devices are there, not in allocatable
    events: tuple[Obj, ...] = ()  # core/v1 Events


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    pods: int  # topoplace pods seen
    bound: int
    unschedulable: int
    unconverged: tuple[str, ...]  # namespace/name of pods neither bound nor unschedulable with a reason
    violations: tuple[Violation, ...]
    preempted: int = 0  # pods of ours evicted by a preemption (gone from the cluster by design)

    def by_kind(self) -> dict[str, int]:
        counts = Counter(v.kind for v in self.violations)
        return {kind: counts.get(kind, 0) for kind in VIOLATION_KINDS}


def _key(obj: Obj) -> str:
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _live(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def _pod_scheduled(pod: Obj) -> Obj | None:
    for condition in pod.get("status", {}).get("conditions") or ():
        if condition.get("type") == "PodScheduled":
            return condition  # type: ignore[no-any-return]
    return None


def _unschedulable(pod: Obj) -> bool:
    condition, nominated = _pod_scheduled(pod), (pod.get("status") or {}).get("nominatedNodeName")
    if condition is None or condition.get("status") != "False" or nominated:  # nominated: on its way to its node
        return False
    return condition.get("reason") == "Unschedulable" and bool(condition.get("message"))


def _transition(pod: Obj) -> datetime.datetime | None:
    """When the pod's PodScheduled condition last changed (the API server's RFC 3339 seconds), if it says."""
    condition = _pod_scheduled(pod)
    text = condition.get("lastTransitionTime") if condition is not None else None
    if not isinstance(text, str):
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _group_key(pod: Obj) -> str | None:
    group = (pod["metadata"].get("annotations") or {}).get(VOLCANO_GROUP_ANNOTATION)
    return f"{pod['metadata'].get('namespace', '')}/{group}" if group else None


def _stale_reasons(pods: list[Obj]) -> set[str]:
    """Pending gang members whose Unschedulable reason is no newer than their gang's first binding
    (both times known; a tie counts as stale, the times being whole seconds)."""
    first_bound: dict[str, datetime.datetime] = {}
    for pod in pods:
        group = _group_key(pod)
        at = _transition(pod) if group and pod["spec"].get("nodeName") and _live(pod) else None
        if group and at is not None and (group not in first_bound or at < first_bound[group]):
            first_bound[group] = at
    stale = set()
    for pod in pods:
        group = _group_key(pod)
        if group not in first_bound or pod["spec"].get("nodeName") or not _unschedulable(pod):
            continue
        at = _transition(pod)
        if at is not None and at <= first_bound[group]:
            stale.add(_key(pod))
    return stale


def _requests(pod: Obj) -> dict[str, int]:
    """Summed container requests in milli-units (quantities as Kubernetes writes them)."""
    total: dict[str, int] = defaultdict(int)
    for container in pod.get("spec", {}).get("containers") or ():
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            with contextlib.suppress(ValueError):
                total[resource] += int(parse_quantity(str(value)) * 1000)
    return total


def _device_count(node: Obj, sliced: int = 0) -> int:
    """Devices the node has: its device-plugin resources, or the devices its ResourceSlices publish."""
    allocatable = node.get("status", {}).get("allocatable") or {}
    return max(sum(int(allocatable.get(resource, "0")) for resource in DEVICE_RESOURCE.values()), sliced)


def _sliced(slices: tuple[Obj, ...]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("nodeName"):
            counts[spec["nodeName"]] += len(spec.get("devices") or ())
    return counts


def _devices_of(pod: Obj, node: str, key: DecisionKey | None) -> tuple[tuple[DeviceAssignment, ...] | None, str]:
    """The devices a bound pod holds, and why its annotations are wrong if they are.

    With the run's key, from the binder's seal, as every service reads them (a tenant's edit of
    `topoplace.io/devices` changes nothing); without one, from the annotation itself."""
    annotations = pod["metadata"].get("annotations") or {}
    if key is not None:
        sealed = key.check(pod["metadata"].get("uid", ""), node, annotations)
        return sealed.devices, (f"{SEAL}: {sealed.problem}" if sealed.problem else "")
    if DEVICES not in annotations:
        return None, ""
    try:
        return decode_devices(annotations[DEVICES]), ""
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        return None, f"{DEVICES}: {exc}"


# (node, device index) -> [(pod, memory_mib, cores)]
Holders = dict[tuple[str, int], list[tuple[str, int, int]]]


def judge(
    objects: ClusterObjects, key: DecisionKey | None = None, priorities: Mapping[str, int] | None = None
) -> Verdict:
    """`key`: the run's seal key (see `_devices_of`); `priorities`: each submitted pod's, by name."""
    nodes = {n["metadata"]["name"]: n for n in objects.nodes}
    sliced = _sliced(objects.slices)
    mine = [p for p in objects.pods if p.get("spec", {}).get("schedulerName") == SCHEDULER_NAME]
    violations: list[Violation] = []
    bound = unschedulable = 0
    unconverged: list[str] = []
    holders: Holders = defaultdict(list)
    requested: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    on_node: dict[str, list[str]] = defaultdict(list)
    stale = _stale_reasons(mine)

    for pod in mine:
        node_name = pod["spec"].get("nodeName")
        if not node_name:
            if _unschedulable(pod) and _key(pod) not in stale:
                unschedulable += 1
            else:
                unconverged.append(_key(pod))
            continue
        bound += 1
        if not _live(pod):
            continue
        on_node[node_name].append(_key(pod))
        for resource, milli in _requests(pod).items():
            requested[node_name][resource] += milli
        count = _device_count(nodes[node_name], sliced.get(node_name, 0)) if node_name in nodes else 0
        violations += _bound_pod_devices(pod, node_name, count, key, holders)

    violations += _device_violations(holders)
    violations += _overcommitted(requested, nodes, on_node)
    violations += _gang_violations(mine, objects.podgroups, stale)
    violations += foreign_pods_touched(objects.pods, objects.events)
    violations += bound_against_rules(mine, nodes)
    violations += [
        Violation(kind=kind, subject=subject, detail=detail)
        for kind, subject, detail in preemption_violations(objects.pods, objects.events, priorities or {})
    ]
    return Verdict(
        pods=len(mine),
        bound=bound,
        unschedulable=unschedulable,
        unconverged=tuple(unconverged),
        violations=tuple(violations),
        preempted=len(preempted_victims(objects.events)),
    )


def _bound_pod_devices(
    pod: Obj, node_name: str, count: int, key: DecisionKey | None, holders: Holders
) -> list[Violation]:
    """A live bound pod's devices: added to `holders`; what is wrong with them, as violations."""
    violations: list[Violation] = []
    annotations = pod["metadata"].get("annotations") or {}
    devices, problem = _devices_of(pod, node_name, key)
    if problem:
        violations.append(Violation(kind="bad_annotation", subject=_key(pod), detail=problem))
    if devices is None:
        return violations
    if annotations.get(NODE, node_name) != node_name:
        violations.append(
            Violation(
                kind="unknown_device",
                subject=_key(pod),
                detail=f"bound to {node_name} but {NODE} says {annotations[NODE]!r}",
            )
        )
    for device in devices:
        if not 0 <= device.index < count:
            violations.append(
                Violation(
                    kind="unknown_device",
                    subject=f"{node_name}/{device.index}",
                    detail=f"{_key(pod)} holds device {device.index}; the node has {count} devices",
                )
            )
        holders[(node_name, device.index)].append((_key(pod), device.memory_mib, device.cores))
    return violations


def _device_violations(holders: Holders) -> list[Violation]:
    """A device held whole and shared at once, or shared past its 100 cores."""
    violations: list[Violation] = []
    for (node_name, index), held in sorted(holders.items()):
        subject = f"{node_name}/{index}"
        if len(held) > 1 and any(memory == 0 for _, memory, _ in held):
            pods = ", ".join(p for p, _, _ in held)
            violations.append(
                Violation(kind="device_conflict", subject=subject, detail=f"held whole and shared: {pods}")
            )
        cores = sum(c for _, _, c in held)
        if cores > 100:
            violations.append(Violation(kind="capacity_exceeded", subject=subject, detail=f"{cores} cores of 100"))
    return violations


def _overcommitted(
    requested: dict[str, dict[str, int]], nodes: dict[str, Obj], on_node: dict[str, list[str]]
) -> list[Violation]:
    """Nodes whose live bound pods request more of a resource than the node has allocatable."""
    violations: list[Violation] = []
    for node_name, totals in sorted(requested.items()):
        allocatable = (nodes.get(node_name, {}).get("status") or {}).get("allocatable") or {}
        for resource, milli in sorted(totals.items()):
            if resource not in allocatable:
                continue
            limit = int(parse_quantity(str(allocatable[resource])) * 1000)
            if milli > limit:
                pods = ", ".join(sorted(on_node[node_name])[:16])
                violations.append(
                    Violation(
                        kind="node_overcommitted",
                        subject=f"{node_name}/{resource}",
                        detail=f"requested {milli / 1000:g} of {limit / 1000:g} by {pods}",
                    )
                )
    return violations


def _gang_violations(pods: list[Obj], podgroups: tuple[Obj, ...], stale: set[str]) -> list[Violation]:
    members: dict[str, list[Obj]] = defaultdict(list)
    for pod in pods:
        group = _group_key(pod)
        if group:
            members[group].append(pod)
    out = []
    for podgroup in podgroups:
        key = _key(podgroup)
        min_member = int((podgroup.get("spec") or {}).get("minMember") or 1)
        live = [p for p in members.get(key, ()) if _live(p)]
        placed = sum(1 for p in live if p["spec"].get("nodeName"))
        in_flight = sum(
            1 for p in live if not p["spec"].get("nodeName") and (not _unschedulable(p) or _key(p) in stale)
        )
        if 0 < placed < min_member and placed + in_flight < min_member:
            out.append(
                Violation(kind="gang_partly_bound", subject=key, detail=f"{placed} of minMember {min_member} bound")
            )
    return out


def foreign_pods_touched(pods: tuple[Obj, ...], events: tuple[Obj, ...]) -> list[Violation]:
    """Pods of other schedulers that topoplace bound (its Binding writes the decision annotation), told
    PodScheduled=False or gave an Event. A pod created with `spec.nodeName` and a device annotation of its
    own (a squatter) is no violation: nobody bound it."""
    foreign = {
        pod["metadata"].get("uid", ""): pod
        for pod in pods
        if pod.get("spec", {}).get("schedulerName") != SCHEDULER_NAME
    }
    out = []
    for pod in (foreign[uid] for uid in sorted(foreign)):
        decided = DECISION in (pod["metadata"].get("annotations") or {})
        # PodScheduled=True is the API server's and the kubelet's once a pod runs; False is a scheduler's word.
        refused = (_pod_scheduled(pod) or {}).get("status") == "False"
        if refused or decided:
            detail = "bound by topoplace" if decided else "a PodScheduled=False condition"
            out.append(Violation(kind="foreign_pod_touched", subject=_key(pod), detail=detail))
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        source = (event.get("source") or {}).get("component") or event.get("reportingComponent") or ""
        # A Preempted Event is kube-scheduler's too: a lower-priority pod of any scheduler may be a victim.
        if involved.get("uid") in foreign and "topoplace" in source and event.get("reason") != "Preempted":
            pod = foreign[involved["uid"]]
            out.append(Violation(kind="foreign_pod_touched", subject=_key(pod), detail=f"Event {event.get('reason')}"))
    return out


def _tolerates(taint: Obj, tolerations: list[Obj]) -> bool:
    """The core/v1 toleration rule: empty key with Exists matches every taint; an empty effect every effect."""
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator") or "Equal"
        if operator == "Exists" and (not toleration.get("key") or toleration["key"] == taint.get("key")):
            return True
        same_value = (toleration.get("value") or "") == (taint.get("value") or "")
        if operator == "Equal" and toleration.get("key") == taint.get("key") and same_value:
            return True
    return False


def bound_against_rules(mine: list[Obj], nodes: dict[str, Obj]) -> list[Violation]:
    out = []
    for pod in mine:
        node = nodes.get(pod["spec"].get("nodeName") or "")
        if node is None or not _live(pod):
            continue
        labels = node["metadata"].get("labels") or {}
        for key, value in sorted((pod["spec"].get("nodeSelector") or {}).items()):
            if labels.get(key) != value:
                detail = f"on {node['metadata']['name']}, whose labels lack nodeSelector {key}={value}"
                out.append(Violation(kind="bound_against_rules", subject=_key(pod), detail=detail))
        tolerations = pod["spec"].get("tolerations") or []
        for taint in (node.get("spec") or {}).get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(taint, tolerations):
                detail = f"on {node['metadata']['name']}, untolerated taint {taint.get('key')}:{taint.get('effect')}"
                out.append(Violation(kind="bound_against_rules", subject=_key(pod), detail=detail))
    return out
