"""The parts of a Pod and a Node that kube-scheduler's filters read, in Kubernetes' JSON shape.

Decode them straight from the API's JSON (`msgspec.json.decode(raw, type=Affinity)`):
field names are camelCase, unknown fields are ignored. Each Struct checks what
the API server's validation checks (k8s.io/kubernetes pkg/apis/core/validation)
where a mistake would change a scheduling decision, and raises RequestError naming
the field (msgspec adds the path, e.g. "- at `$.nodeAffinity...`").

`HostPort` is one port a container takes on its node (NodePorts).

`Affinity` carries node affinity; a pod's `podAffinity` and `podAntiAffinity`
are read on their own (`PodAffinities`, from the same `spec.affinity` object)
with its `topologySpreadConstraints` (`TopologySpreadConstraint`), so a reader
that knows the pods running on each node (InterPodAffinity, PodTopologySpread)
asks for them and one that does not is unchanged.
"""

from __future__ import annotations

import re

import msgspec

from schemas.errors import FieldError as RequestError

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"
TAINT_EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE)

EQUAL = "Equal"
EXISTS = "Exists"
TOLERATION_OPERATORS = (EQUAL, EXISTS, "")  # "" means Equal

IN = "In"
NOT_IN = "NotIn"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT)
NODE_NAME_FIELD = "metadata.name"  # the one field matchFields may name

_INT64 = re.compile(r"[+-]?[0-9]+", re.ASCII)


def parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), or None where it fails (no spaces, no "_", no "1e3")."""
    if _INT64.fullmatch(text) is None or len(text) > 20:
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


class Taint(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: str

    def __post_init__(self) -> None:
        if not self.key:
            raise RequestError("key", "a taint needs a key")
        if self.effect not in TAINT_EFFECTS:
            raise RequestError("effect", f"unknown taint effect {self.effect!r} (allowed: {', '.join(TAINT_EFFECTS)})")


class Toleration(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    key: str = ""
    operator: str = EQUAL
    value: str = ""
    effect: str = ""  # "" tolerates every effect
    toleration_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.operator not in TOLERATION_OPERATORS:
            raise RequestError("operator", f"unknown toleration operator {self.operator!r} (allowed: Equal, Exists)")
        if not self.key and self.operator != EXISTS:
            raise RequestError("operator", "must be Exists when key is empty (it then matches every taint)")
        if self.operator == EXISTS and self.value:
            raise RequestError("value", f"must be empty when operator is Exists, got {self.value!r}")
        if self.effect and self.effect not in TAINT_EFFECTS:
            raise RequestError("effect", f"unknown taint effect {self.effect!r} (allowed: {', '.join(TAINT_EFFECTS)})")
        if self.toleration_seconds is not None and self.effect != NO_EXECUTE:
            raise RequestError("tolerationSeconds", "is only allowed with effect NoExecute")


class NodeSelectorRequirement(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        op, count = self.operator, len(self.values)
        if op not in SELECTOR_OPERATORS:
            raise RequestError("operator", f"unknown operator {op!r} (allowed: {', '.join(SELECTOR_OPERATORS)})")
        if not self.key:
            raise RequestError("key", "a node selector requirement needs a key")
        if op in (IN, NOT_IN) and count == 0:
            raise RequestError("values", f"must be given when operator is {op}")
        if op in (EXISTS, DOES_NOT_EXIST) and count:
            raise RequestError("values", f"must be empty when operator is {op}, got {list(self.values)}")
        if op in (GT, LT) and (count != 1 or parse_int64(self.values[0]) is None):
            raise RequestError("values", f"must be one integer when operator is {op}, got {list(self.values)}")


class NodeSelectorTerm(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()

    def __post_init__(self) -> None:
        for requirement in self.match_fields:
            if requirement.key != NODE_NAME_FIELD:
                raise RequestError("matchFields.key", f"must be {NODE_NAME_FIELD}, got {requirement.key!r}")
            if requirement.operator not in (IN, NOT_IN):
                raise RequestError("matchFields.operator", f"must be In or NotIn, got {requirement.operator!r}")
            if len(requirement.values) != 1:
                raise RequestError("matchFields.values", f"must be one node name, got {list(requirement.values)}")

    @property
    def empty(self) -> bool:
        """An empty term selects no node (kube skips it)."""
        return not self.match_expressions and not self.match_fields


class NodeSelector(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    node_selector_terms: tuple[NodeSelectorTerm, ...]  # ORed; none = no node matches


class PreferredSchedulingTerm(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    weight: int
    preference: NodeSelectorTerm

    def __post_init__(self) -> None:
        if not 1 <= self.weight <= 100:
            raise RequestError("weight", f"must be between 1 and 100, got {self.weight}")


class NodeAffinity(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class Affinity(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """Node affinity (podAffinity and podAntiAffinity: `PodAffinities`, read from the same object)."""

    node_affinity: NodeAffinity | None = None


BIND_ALL_HOST_IP = "0.0.0.0"  # a hostIP of "" means this: every address of the node
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")


class HostPort(msgspec.Struct, frozen=True, kw_only=True):
    """One host port a pod's container takes on its node (a containerPort with hostPort > 0), as
    kube-scheduler's NodePorts reads it: (hostIP, protocol, hostPort). Empty hostIP and protocol
    are sanitised as kube does: 0.0.0.0 and TCP."""

    port: int
    protocol: str = "TCP"
    host_ip: str = BIND_ALL_HOST_IP

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65_535:
            raise RequestError("port", f"must be between 1 and 65535, got {self.port}")
        if self.protocol and self.protocol not in PORT_PROTOCOLS:
            raise RequestError("protocol", f"unknown protocol {self.protocol!r} (allowed: {', '.join(PORT_PROTOCOLS)})")


LABEL_SELECTOR_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)


class LabelSelectorRequirement(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        op = self.operator
        if op not in LABEL_SELECTOR_OPERATORS:
            raise RequestError("operator", f"unknown operator {op!r} (allowed: {', '.join(LABEL_SELECTOR_OPERATORS)})")
        if not self.key:
            raise RequestError("key", "a label selector requirement needs a key")
        if op in (IN, NOT_IN) and not self.values:
            raise RequestError("values", f"must be given when operator is {op}")
        if op in (EXISTS, DOES_NOT_EXIST) and self.values:
            raise RequestError("values", f"must be empty when operator is {op}, got {list(self.values)}")


class LabelSelector(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """metav1.LabelSelector: matchLabels and matchExpressions ANDed; an empty one selects everything."""

    match_labels: dict[str, str] = {}
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class PodAffinityTerm(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """Pods (labelSelector, in namespaces) in the same topologyKey domain as the node.

    No labelSelector selects no pod; no namespaces and no namespaceSelector mean the pod's own
    namespace; an empty namespaceSelector means every namespace. matchLabelKeys / mismatchLabelKeys
    add `key In / NotIn (the owner pod's value)` to the selector for the keys the owner pod has."""

    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    topology_key: str
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.topology_key:
            raise RequestError("topologyKey", "must not be empty")
        both = set(self.match_label_keys) & set(self.mismatch_label_keys)
        if both:
            raise RequestError("matchLabelKeys", f"{sorted(both)} also in mismatchLabelKeys")
        if self.label_selector is None and (self.match_label_keys or self.mismatch_label_keys):
            raise RequestError("matchLabelKeys", "needs a labelSelector")


class WeightedPodAffinityTerm(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    weight: int
    pod_affinity_term: PodAffinityTerm

    def __post_init__(self) -> None:
        if not 1 <= self.weight <= 100:
            raise RequestError("weight", f"must be between 1 and 100, got {self.weight}")


class PodAffinityRules(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """podAffinity or podAntiAffinity: required terms (every one must hold) and weighted preferred ones."""

    required_during_scheduling_ignored_during_execution: tuple[PodAffinityTerm, ...] = ()
    preferred_during_scheduling_ignored_during_execution: tuple[WeightedPodAffinityTerm, ...] = ()


class PodAffinities(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """The pod (anti-)affinity part of a pod's `spec.affinity`."""

    pod_affinity: PodAffinityRules | None = None
    pod_anti_affinity: PodAffinityRules | None = None

    @property
    def empty(self) -> bool:
        affinity, anti = self.pod_affinity, self.pod_anti_affinity
        return not any(
            rules is not None
            and (
                rules.required_during_scheduling_ignored_during_execution
                or rules.preferred_during_scheduling_ignored_during_execution
            )
            for rules in (affinity, anti)
        )


DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"


class TopologySpreadConstraint(msgspec.Struct, rename="camel", frozen=True, kw_only=True):
    """One of a pod's topologySpreadConstraints (defaults as the API server's: nodeAffinityPolicy Honor,
    nodeTaintsPolicy Ignore; minDomains only with DoNotSchedule)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE
    match_label_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_skew < 1:
            raise RequestError("maxSkew", f"must be at least 1, got {self.max_skew}")
        if not self.topology_key:
            raise RequestError("topologyKey", "must not be empty")
        if self.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            raise RequestError(
                "whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {self.when_unsatisfiable!r}"
            )
        if self.min_domains is not None and (self.min_domains < 1 or self.when_unsatisfiable != DO_NOT_SCHEDULE):
            raise RequestError("minDomains", "must be at least 1, and only with whenUnsatisfiable DoNotSchedule")
        policies = (("nodeAffinityPolicy", self.node_affinity_policy), ("nodeTaintsPolicy", self.node_taints_policy))
        for field, policy in policies:
            if policy not in (HONOR, IGNORE):
                raise RequestError(field, f"must be Honor or Ignore, got {policy!r}")
