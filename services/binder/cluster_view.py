"""What the API server says of pods and nodes, as the binder's watch last saw it (pure).

Fed by the binder's informers (`topoplace.informer`: a list, then watch events). The binder trusts it for
facts that never go back: a pod bound to a node stays bound there, a pod
being deleted stays so, a uid that left the cluster never returns. A pod the
view does not know (yet) is not taken as gone: the watch may lag behind a pod
just created, so such a pod is asked of the server instead.

Per pod it keeps a small view (`PodView`) and, only while the pod is one of
ours waiting for a node, what it asks of its node (`PlacementRules`); per
node, its allocatable and what decides which pods may go there (`NodeRules`).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from schemas.seal import DecisionKey
from services.binder.kube_objects import NodeObject, NodeRules, PlacementRules, PodObject
from services.binder.node_fit import NodeFit
from services.binder.outcome import PodView


class PodChange(msgspec.Struct, frozen=True, kw_only=True):
    """One pod's change as the ledger needs it: its view now, or None when it left the cluster."""

    uid: str
    namespace: str
    name: str
    now: PodView | None


class ClusterView:
    def __init__(self, scheduler_name: str = "topoplace", *, decision_key: DecisionKey | None = None) -> None:
        """`decision_key`: the seal's key; a pod's devices count only from a seal it verifies."""
        self.scheduler_name = scheduler_name  # only its pods' placement rules are kept
        self._decision_key = decision_key
        self._pods: dict[str, PodView] = {}  # by uid
        self._pod_names: dict[str, tuple[str, str]] = {}  # uid -> (namespace, name)
        self._rules: dict[str, PlacementRules] = {}  # by uid: our pods waiting for a node only
        self._allocatable: dict[str, dict[str, str]] = {}  # node -> resource -> quantity
        self._node_rules: dict[str, NodeRules] = {}
        self.fit = NodeFit()  # the nodes' resources used by their pods, and by binds in flight
        self.pods_synced = False  # the first full list of pods was applied
        self.nodes_synced = False

    # --- pods -----------------------------------------------------------------------------------

    def pod(self, uid: str) -> PodView | None:
        return self._pods.get(uid)

    def pod_name(self, uid: str) -> tuple[str, str] | None:
        """(namespace, name) of the pod with this uid."""
        return self._pod_names.get(uid)

    def placement_rules(self, uid: str) -> PlacementRules | None:
        """What the pod asks of its node; None unless it is one of ours waiting for a node."""
        return self._rules.get(uid)

    def bound_on(self, uid: str, node: str) -> bool:
        """The watch has the pod bound to this node."""
        pod = self._pods.get(uid)
        return pod is not None and pod.node_name == node and not pod.finished

    def nominated_below(self, node: str, priority: int, but: str) -> list[str]:
        """Pending pods of ours nominated to `node` with a priority below `priority` (preemption clears them)."""
        return sorted(
            uid
            for uid, pod in self._pods.items()
            if uid != but
            and pod.nominated_node == node
            and not pod.node_name
            and pod.priority < priority
            and pod.scheduler_name == self.scheduler_name
        )

    def nominated(self) -> list[tuple[str, PodView]]:
        """Pending pods nominated to a node (status.nominatedNodeName), by uid."""
        found = [(uid, pod) for uid, pod in self._pods.items() if pod.nominated_node and not pod.node_name]
        return sorted(found, key=lambda item: item[0])

    def knows_gone(self, uid: str) -> bool:
        """The pod is not in the cluster (or has finished), as far as a synced watch can tell."""
        if not self.pods_synced:
            return False
        pod = self._pods.get(uid)
        return pod is None or pod.finished

    def apply_pod(self, event_type: str, obj: PodObject) -> PodChange:
        meta = obj.metadata
        if event_type == "DELETED":
            self._pods.pop(meta.uid, None)
            self._pod_names.pop(meta.uid, None)
            self._rules.pop(meta.uid, None)
            self.fit.observe(meta.uid, "", {}, live=False)
            return PodChange(uid=meta.uid, namespace=meta.namespace, name=meta.name, now=None)
        view = obj.view(self._decision_key)
        self._pods[meta.uid] = view
        if view.node_name or view.finished or view.scheduler_name != self.scheduler_name:
            self._rules.pop(meta.uid, None)  # bound, ended or not ours: no placement of it is checked on rules
        else:
            self._rules[meta.uid] = obj.placement_rules()
        self.fit.observe(meta.uid, view.node_name, view.requests, live=not view.finished)
        self._pod_names[meta.uid] = (meta.namespace, meta.name)
        return PodChange(uid=meta.uid, namespace=meta.namespace, name=meta.name, now=view)

    def replace_pods(self, objects: Iterable[PodObject]) -> list[PodChange]:
        """A full list: every pod in it, and a removal for each known pod missing from it."""
        changes = [self.apply_pod("ADDED", obj) for obj in objects]
        listed = {c.uid for c in changes}
        self.fit.forget_missing(listed)
        for uid in [uid for uid in self._pods if uid not in listed]:
            namespace, name = self._pod_names.pop(uid)
            del self._pods[uid]
            self._rules.pop(uid, None)
            changes.append(PodChange(uid=uid, namespace=namespace, name=name, now=None))
        self.pods_synced = True
        return changes

    # --- nodes ----------------------------------------------------------------------------------

    def allocatable(self, node: str) -> dict[str, str] | None:
        """The Node's allocatable resources, or None when there is no such Node (or no list yet)."""
        return self._allocatable.get(node)

    def node_rules(self, node: str) -> NodeRules | None:
        """The Node's labels, taints, cordon and readiness, or None when there is no such Node."""
        return self._node_rules.get(node)

    def apply_node(self, event_type: str, obj: NodeObject) -> None:
        name = obj.metadata.name
        if event_type == "DELETED":
            self._allocatable.pop(name, None)
            self._node_rules.pop(name, None)
        else:
            self._allocatable[name] = {k: str(v) for k, v in obj.status.allocatable.items()}
            self._node_rules[name] = obj.rules()

    def replace_nodes(self, objects: Iterable[NodeObject]) -> None:
        self._allocatable.clear()
        self._node_rules.clear()
        for obj in objects:
            self.apply_node("ADDED", obj)
        self.nodes_synced = True
