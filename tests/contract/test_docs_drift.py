"""The docs say what the deployment and the test API server are: the RBAC table of docs/deploy.md
against deploy/'s roles, and docs/kube-api.md's table of what the test API server serves against it."""

from __future__ import annotations

import re
from pathlib import Path

import deploy_manifests as manifests
import msgspec
import pytest
import yaml
from deploy_kube_calls import Permission

from topoplace.dev.kubeapi import resources

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "topoplace"
HAMI_COMPONENT = "with `components/hami`"


def table_after(path: Path, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after `heading`, header and separator left out."""
    lines = path.read_text().splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def documented_rbac() -> tuple[dict[str, set[Permission]], dict[str, set[Permission]]]:
    """docs/deploy.md's RBAC table: per ServiceAccount, the base grants and those `components/hami` adds."""
    base: dict[str, set[Permission]] = {}
    hami: dict[str, set[Permission]] = {}
    account, into = "", base
    for who, group, resource_cell, verbs, _why in table_after(ROOT / "docs" / "deploy.md", "## RBAC"):
        if who:
            account = re.findall(r"`([^`]+)`", who)[0]
            into = hami if HAMI_COMPONENT in who else base
            into.setdefault(account, set())
        if resource_cell == "—":
            continue
        api_group = "" if group == "core" else re.findall(r"`([^`]+)`", group)[0]
        for resource in resource_cell.split(", "):
            for verb in verbs.split(", "):
                into[account].add(Permission(api_group, resource, verb))
    return base, hami


def granted(account: str, objects: list[dict[str, object]]) -> set[Permission]:
    return {
        Permission(group, resource, verb)
        for rule in manifests.rules_of(objects, NAMESPACE, account)
        for group in rule["apiGroups"]  # type: ignore[index]
        for resource in rule["resources"]  # type: ignore[index]
        for verb in rule["verbs"]  # type: ignore[index]
    }


OBJECTS = manifests.render()
HAMI_OBJECTS = manifests.render(components=("hami",))
ACCOUNTS = sorted({manifests.service_account(w) for w in manifests.workloads(OBJECTS)})


def test_the_rbac_table_names_every_service_account() -> None:
    base, _ = documented_rbac()
    assert sorted(base) == ACCOUNTS


@pytest.mark.parametrize("account", ACCOUNTS)
def test_the_rbac_table_is_what_deploy_grants(account: str) -> None:
    base, hami = documented_rbac()
    assert sorted(map(str, base[account])) == sorted(map(str, granted(account, OBJECTS)))
    added = granted(account, HAMI_OBJECTS) - granted(account, OBJECTS)
    assert sorted(map(str, hami.get(account, set()))) == sorted(map(str, added))


def test_the_rbac_table_reader_sees_the_rows() -> None:
    # A reader gone blind would compare nothing with nothing for the accounts without a role.
    base, hami = documented_rbac()
    assert Permission("", "pods/binding", "create") in base["topoplace-binder"]
    assert Permission("coordination.k8s.io", "leases", "update") in base["topoplace-binder"]
    assert hami["topoplace-binder"] == {Permission("", "nodes", "get"), Permission("", "nodes", "patch")}


def served_paths() -> str:
    """docs/kube-api.md's paths, with the optional namespace and name parts taken out."""
    rows = table_after(ROOT / "docs" / "kube-api.md", "### What it serves")
    paths = " ".join(row[0] for row in rows)
    return re.sub(r"\[/namespaces/\{ns\}\]|/namespaces/\{ns\}|\[/\{name\}[^`]*", "", paths)


@pytest.mark.parametrize("served", resources.ALL, ids=lambda r: r.key)
def test_the_kube_api_doc_lists_every_resource_the_test_server_serves(served: resources.ResourceType) -> None:
    paths = served_paths()
    each = all(f"{served.base_path_of(v)}/{served.plural}`" in paths for v in served.versions)
    together = f"/apis/{served.group}/{{{','.join(served.versions)}}}/{served.plural}`" in paths
    assert each or together, f"docs/kube-api.md does not list {served.key} ({', '.join(served.versions)})"


def measured_best_node_policy() -> str:
    """The topoplace node policy README's fragmentation table measured to leave the least GPU unallocated."""
    rows = table_after(ROOT / "README.md", "**Fragmentation** on the Alibaba GPU trace (2023), replayed as the FGD")
    ours = {}
    for policy, unallocated, *_ in rows:
        named = re.search(r"topoplace.*`(\w+)` node policy", policy)
        if named:
            ours[named.group(1)] = float(unallocated.strip("*").split(" ±")[0])
    assert len(ours) >= 2, rows
    return min(ours, key=ours.__getitem__)


def test_the_shipped_node_policy_is_the_measured_best() -> None:
    best = measured_best_node_policy()
    (config,) = [o for o in manifests.of_kind(OBJECTS, "ConfigMap") if o["metadata"]["name"] == "topoplace-settings"]
    assert config["data"]["TOPOPLACE_NODE_POLICY"] == best  # type: ignore[index]
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert compose["services"]["placer"]["environment"]["TOPOPLACE_NODE_POLICY"] == best


def test_the_demo_cluster_has_the_node_count_the_docs_give_and_compose_runs() -> None:
    from topoplace.dev.demo.cluster import default_cluster

    nodes = [(n.name, n.fixture) for n in default_cluster().nodes]
    fleet = msgspec.json.decode((ROOT / "deploy" / "compose" / "fleet.json").read_bytes())
    assert [(m["node"], m["source"]) for m in fleet["members"]] == nodes
    for doc in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        for count in re.findall(r"(\d+) simulated (?:GPU )?nodes", doc.read_text()):
            assert int(count) == len(nodes), (
                f"{doc.name} says {count} simulated nodes; the demo cluster has {len(nodes)}"
            )
