"""deploy/kubernetes as `kubectl apply -k` would send it, for the deploy tests.

The kustomization uses `resources` only (no generators, patches or name
transformers), so rendering it is reading each listed file in order; a field
this reader does not know fails the tests instead of being rendered wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "resources"}

Manifest = dict[str, Any]


def kustomization() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((KUSTOMIZE_DIR / "kustomization.yaml").read_text())
    return loaded


def render() -> list[Manifest]:
    spec = kustomization()
    unknown = set(spec) - KUSTOMIZATION_FIELDS
    if unknown:
        raise ValueError(f"kustomization.yaml: fields this renderer does not apply: {sorted(unknown)}")
    objects: list[Manifest] = []
    for resource in spec["resources"]:
        path = KUSTOMIZE_DIR / resource
        objects += [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
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
