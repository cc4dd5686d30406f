"""kube-scheduler's DefaultSelector: which pods count alongside a pod for the cluster-default spread.

The selectors of the Services of the pod's namespace that select it, merged, plus the selector of its
controller (the ownerReference with `controller: true`) when that is a ReplicationController,
ReplicaSet or StatefulSet. Empty: the pod gets no default constraints. Owners are matched by kind and
name (a pod's ownerReferences as the cluster watcher reads them carry no apiVersion).

One home for the rule, pure: the cluster watcher keeps these selectors from its watches, and
`topoplace engine place --cluster` from the objects given in files.
"""

from __future__ import annotations

from collections.abc import Mapping

from schemas.kube import LabelSelector, LabelSelectorRequirement

CONTROLLER_KINDS = ("ReplicationController", "ReplicaSet", "StatefulSet")


class WorkloadSelectors:
    """The Services' selectors by namespace and name, and the controllers' by (kind, namespace/name)."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, dict[str, str]]] = {}
        self.controllers: dict[tuple[str, str], LabelSelector] = {}

    def set_service(self, namespace: str, name: str, selector: Mapping[str, str] | None) -> None:
        """A Service without a selector selects no pod (its endpoints are managed by hand)."""
        if selector:
            self.services.setdefault(namespace, {})[name] = dict(selector)
        else:
            self.drop_service(namespace, name)

    def drop_service(self, namespace: str, name: str) -> None:
        services = self.services.get(namespace)
        if services is not None:
            services.pop(name, None)
            if not services:
                del self.services[namespace]

    def set_controller(self, kind: str, namespace: str, name: str, selector: LabelSelector | None) -> None:
        if selector is not None and (selector.match_labels or selector.match_expressions):
            self.controllers[(kind, f"{namespace}/{name}")] = selector
        else:
            self.controllers.pop((kind, f"{namespace}/{name}"), None)

    def drop_controller(self, kind: str, namespace: str, name: str) -> None:
        self.controllers.pop((kind, f"{namespace}/{name}"), None)

    def default_selector(
        self, namespace: str, labels: Mapping[str, str], controller: tuple[str, str] | None
    ) -> LabelSelector | None:
        """The pod's DefaultSelector (None: empty). `controller`: (kind, name) of its controlling owner."""
        merged: dict[str, str] = {}
        for _, selector in sorted(self.services.get(namespace, {}).items()):
            if all(labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        expressions: tuple[LabelSelectorRequirement, ...] = ()
        if controller is not None and controller[0] in CONTROLLER_KINDS:
            found = self.controllers.get((controller[0], f"{namespace}/{controller[1]}"))
            if found is not None:
                merged.update(found.match_labels)
                expressions = found.match_expressions
        if not merged and not expressions:
            return None
        return LabelSelector(match_labels=merged, match_expressions=expressions)
