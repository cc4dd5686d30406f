"""A gang's members against each other's required anti-affinity and topology spread constraints.

Each member's node rules already hold it to the pods running on the cluster (the cluster index).
Inside one plan, members placed earlier count as running for the later ones, as they would once
bound one by one:

    required anti-affinity   a member's term selecting a member placed in the node's domain refuses
                             the node, and so does a placed member's term selecting this member
                             (existing pods' anti-affinity); one per node for the usual hostname term
    DoNotSchedule spread     matching pods in the domain (running + placed members) + 1 (when the
                             member matches its own selector) - the global minimum before the gang
                             must stay within maxSkew. The minimum can only rise as members are
                             placed, so every member placed this way also passes kube's filter.

Caps are counted per (cap, domain value). A cap whose key is the hostname is a per-node cap: the
slots a node offers are cut to it before the tier walk (`node_cap`), so the walk's totals stay true.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.cluster.index import ClusterIndex
from engine.core.labels import AffinityTerm, Labels
from engine.core.model import PodRequest
from engine.decide.kube.pod_topology import PodTopologyRules
from engine.decide.kube.spread import HOSTNAME, Constraint
from engine.decide.node_rules import PodRules


class JointCap:
    """One limit on the members of one shape: at most `limit(value)` counted members per domain of `key`
    (counted: members of the shapes in `counted`), before a member of the shape may go there."""

    __slots__ = ("counted", "key", "running", "skew_room")

    def __init__(self, key: str, counted: frozenset[bytes], skew_room: int, running: dict[str, int]) -> None:
        self.key = key
        self.counted = counted
        self.skew_room = skew_room  # counted pods a domain may hold before the member (anti-affinity: 0)
        self.running = running  # counted running pods per domain value (anti-affinity: 0 where the node passes)

    def room(self, value: str, placed: int) -> int:
        return self.skew_room - self.running.get(value, 0) - placed


class ShapeFacts:
    """What the caps read of one shape: its key, namespace, labels, required anti terms and rules."""

    def __init__(self, key: bytes, request: PodRequest, rules: PodRules, index: ClusterIndex) -> None:
        self.key = key
        self.namespace = request.namespace
        self.labels: Labels = request.labels
        topology = rules.topology
        asks = (request.affinities is not None and not request.affinities.empty) or bool(
            request.topology_spread_constraints
        )
        if topology is None and asks:  # rules with nothing to refuse on the cluster still bind the members
            topology = PodTopologyRules(request, index, rules.compiled.affinity, rules.facts.tolerations)
        self.anti: Sequence[AffinityTerm] = topology.inter_pod.required_anti if topology is not None else ()
        spread = topology.spread if topology is not None else None
        self.spread: Sequence[Constraint] = spread.hard if spread is not None else ()
        self.spread_counts = spread.counts if spread is not None else []
        self.spread_minimum = spread.minimum if spread is not None else []


class JointRules:
    """The caps of every shape of one gang, and the members placed so far inside one plan."""

    def __init__(self, index: ClusterIndex, shapes: Sequence[ShapeFacts]) -> None:
        self.index = index
        self.caps: dict[bytes, list[JointCap]] = {s.key: [] for s in shapes}
        namespace_labels = index.pods.namespace_labels
        for shape in shapes:
            for term in shape.anti:
                counted = frozenset(
                    o.key for o in shapes if term.matches(o.namespace, o.labels, namespace_labels.get(o.namespace, {}))
                )
                if counted:
                    self.caps[shape.key].append(JointCap(term.topology_key, counted, 0, {}))
                for other in shapes:  # the placed members' own terms, as existing pods' anti-affinity
                    if term.matches(other.namespace, other.labels, namespace_labels.get(other.namespace, {})):
                        self.caps[other.key].append(JointCap(term.topology_key, frozenset((shape.key,)), 0, {}))
            for i, constraint in enumerate(shape.spread):
                counted = frozenset(
                    o.key for o in shapes if o.namespace == shape.namespace and constraint.selector.matches(o.labels)
                )
                if counted:
                    minimum = shape.spread_minimum[i]
                    room = min(minimum, 2**31) + constraint.max_skew - int(constraint.self_match)
                    self.caps[shape.key].append(JointCap(constraint.key, counted, room, shape.spread_counts[i]))
        self.joint = any(self.caps.values())

    def node_cap(self, key: bytes, node: str) -> int | None:
        """The most members of the shape the node may take for its per-node caps (None: no such cap)."""
        labels = self.index.pods.labels_of(node)
        most: int | None = None
        for cap in self.caps.get(key, ()):
            if cap.key == HOSTNAME and key in cap.counted:
                value = labels.get(HOSTNAME)
                room = 1 if value is None else max(0, cap.room(value, 0) + 1)
                most = room if most is None else min(most, room)
        return most

    def placed(self) -> PlacedMembers:
        return PlacedMembers(self)


class PlacedMembers:
    """Members placed inside one plan so far, counted per cap and domain."""

    def __init__(self, rules: JointRules) -> None:
        self.rules = rules
        self.counts: dict[tuple[int, str], int] = {}

    def copy(self) -> PlacedMembers:
        out = PlacedMembers(self.rules)
        out.counts = dict(self.counts)
        return out

    def allows(self, key: bytes, node: str) -> bool:
        """A member of shape `key` may go to `node` after the members placed so far."""
        labels = self.rules.index.pods.labels_of(node)
        for cap in self.rules.caps.get(key, ()):
            value = labels.get(cap.key)
            if value is not None and cap.room(value, self.counts.get((id(cap), value), 0)) < 0:
                return False
        return True

    def add(self, key: bytes, node: str) -> None:
        labels = self.rules.index.pods.labels_of(node)
        for caps in self.rules.caps.values():
            for cap in caps:
                value = labels.get(cap.key)
                if value is not None and key in cap.counted:
                    self.counts[(id(cap), value)] = self.counts.get((id(cap), value), 0) + 1
