"""deploy/kubernetes as `kubectl apply -k` would send it, for the deploy tests.

The kustomization and its components (components/*) use `resources` only (no
generators, patches or name transformers), so rendering them is reading each
listed file in order, the base's, then each component's; a field this reader
does not know fails the tests instead of being rendered wrong. A test renders
the same with `kubectl kustomize` where kubectl is on PATH.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
COMPONENTS_DIR = KUSTOMIZE_DIR / "components"
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources"}

Manifest = dict[str, Any]


def kustomization(directory: Path = KUSTOMIZE_DIR) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((directory / "kustomization.yaml").read_text())
    return loaded


def _read(directory: Path) -> list[Manifest]:
    spec = kustomization(directory)
    unknown = set(spec) - KUSTOMIZATION_FIELDS
    if unknown:
        raise ValueError(f"{directory}/kustomization.yaml: fields this renderer does not apply: {sorted(unknown)}")
    objects: list[Manifest] = []
    for resource in spec["resources"]:
        path = directory / resource
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return objects


def render(components: tuple[str, ...] = ()) -> list[Manifest]:
    """The base, plus the named components of components/ (as an overlay's `components:` adds them)."""
    objects = _read(KUSTOMIZE_DIR)
    for component in components:
        objects += _read(COMPONENTS_DIR / component)
    return objects


def of_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objects if o["kind"] == kind]


def workloads(objects: list[Manifest]) -> list[Manifest]:
    return [o for o in objects if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet", "Job")]


def containers(workload: Manifest) -> Iterator[Manifest]:
    spec = workload["spec"]["template"]["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def service_account(workload: Manifest) -> str:
    return str(workload["spec"]["template"]["spec"].get("serviceAccountName", "default"))


def rules_of(objects: list[Manifest], namespace: str, account: str) -> list[Manifest]:
    """Every RBAC rule granted to one ServiceAccount, through (Cluster)RoleBindings."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
             if o["kind"] in ("Role", "ClusterRole")}  # fmt: skip
    rules: list[Manifest] = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bound = any(
            s["kind"] == "ServiceAccount" and s["name"] == account and s.get("namespace") == namespace
            for s in binding.get("subjects", [])
        )
        if not bound:
            continue
        ref = binding["roleRef"]
        role_namespace = "" if ref["kind"] == "ClusterRole" else binding["metadata"]["namespace"]
        role = roles.get((ref["kind"], role_namespace, ref["name"]))
        if role is None:
            raise ValueError(f"{binding['kind']} {binding['metadata']['name']}: no {ref['kind']} {ref['name']}")
        rules += role.get("rules", [])
    return rules
