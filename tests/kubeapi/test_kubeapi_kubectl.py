"""The kubectl on PATH against the test API server, as a user runs it: discovery, create from YAML,
get -o wide, describe, wait, watch, delete, and the Volcano kinds by name and short name."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path

import pytest
from kubectl_support import KUBECTL, Kubectl, needs_kubectl, read_until, rows

from topoplace.dev.kubeapi import KubeApiServer

pytestmark = needs_kubectl

NODE_AND_POD = """
apiVersion: v1
kind: Node
metadata:
  name: gpu-1
  labels: {node-role.kubernetes.io/worker: ""}
status:
  conditions: [{type: Ready, status: "True"}]
  addresses: [{type: InternalIP, address: 10.0.0.7}]
  nodeInfo: {kubeletVersion: v1.34.0, osImage: Ubuntu 24.04, kernelVersion: "6.8", containerRuntimeVersion: containerd://2.0}
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, labels: {app: train}}
spec:
  schedulerName: topoplace
  containers: [{name: main, image: busybox}]
"""

VOLCANO = """
apiVersion: topology.volcano.sh/v1alpha1
kind: HyperNode
metadata: {name: leaf-1}
spec:
  tier: 1
  tierName: leaf
  members: [{type: Node, selector: {exactMatch: {name: gpu-1}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train}
spec: {minMember: 4, queue: research}
"""


def _pod(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def _bind(server: KubeApiServer, pod: str, node: str = "gpu-1") -> None:
    server.store.bind("default", pod, {"target": {"name": node}})


@pytest.fixture
def kubectl(kube_api: KubeApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(kube_api.url, tmp_path / "kubectl")


async def test_kubectl_discovers_every_served_kind_with_its_short_names(kubectl: Kubectl) -> None:
    listed = await kubectl.ok("api-resources", "--no-headers", "-o", "name")
    assert set(listed.split()) >= {
        "pods",
        "nodes",
        "events",
        "events.events.k8s.io",
        "hypernodes.topology.volcano.sh",
        "podgroups.scheduling.volcano.sh",
        "topologies.kueue.x-k8s.io",
        "resourceslices.resource.k8s.io",
        "resourceclaims.resource.k8s.io",
        "resourceclaimtemplates.resource.k8s.io",
        "deviceclasses.resource.k8s.io",
        "leases.coordination.k8s.io",
    }
    wide = await kubectl.ok("api-resources", "--api-group", "")
    assert rows(wide)["pods"]["SHORTNAMES"] == "po" and rows(wide)["nodes"]["NAMESPACED"] == "false"
    version = json.loads(await kubectl.ok("version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"].startswith("v1.34")


async def test_create_from_yaml_then_get_wide_shows_the_node(kubectl: Kubectl, kube_api: KubeApiServer) -> None:
    created = await kubectl.ok("create", "-f", "-", stdin=NODE_AND_POD)
    assert created.split() == ["node/gpu-1", "created", "pod/trainer", "created"]
    pending = rows(await kubectl.ok("get", "pods", "-o", "wide"))["trainer"]
    assert (pending["READY"], pending["STATUS"], pending["NODE"]) == ("0/1", "Pending", "<none>")
    _bind(kube_api, "trainer")
    bound = rows(await kubectl.ok("get", "po", "-o", "wide"))["trainer"]
    assert (bound["STATUS"], bound["NODE"], bound["IP"]) == ("Running", "gpu-1", "<none>")
    narrow = rows(await kubectl.ok("get", "pod", "trainer"))["trainer"]
    assert "NODE" not in narrow and narrow["STATUS"] == "Running"  # priority-1 columns only with -o wide
    node = rows(await kubectl.ok("get", "no", "-o", "wide"))["gpu-1"]
    assert (node["STATUS"], node["ROLES"], node["VERSION"], node["INTERNAL-IP"]) == (
        "Ready",
        "worker",
        "v1.34.0",
        "10.0.0.7",
    )
    labelled = await kubectl.ok("get", "pods", "-l", "app=train", "-o", "jsonpath={.items[*].spec.nodeName}")
    assert labelled == "gpu-1"


async def test_create_is_validated_by_the_server_and_a_typo_is_refused(
    kubectl: Kubectl, kube_api: KubeApiServer
) -> None:
    typo = NODE_AND_POD.split("---")[1].replace("spec:", "sepc:")
    refused = await kubectl("create", "-f", "-", stdin=typo)
    assert refused.code != 0 and 'strict decoding error: unknown field "sepc"' in refused.err
    assert kube_api.store.list("pods")[0] == []  # nothing was created
    lables = NODE_AND_POD.split("---")[1].replace("labels:", "lables:")
    warned = await kubectl("create", "--validate=warn", "-f", "-", stdin=lables)
    assert warned.code == 0 and 'Warning: unknown field "metadata.lables"' in warned.err
    assert kube_api.store.get("pods", "trainer", "default")["metadata"].get("labels") is None


async def test_describe_shows_the_conditions_and_only_this_pods_events(
    kubectl: Kubectl, kube_api: KubeApiServer
) -> None:
    await kubectl.ok("create", "-f", "-", stdin=NODE_AND_POD)
    store = kube_api.store
    uid = store.get("pods", "trainer", "default")["metadata"]["uid"]
    for name, namespace, pod_uid, message in [
        ("trainer.1", "default", uid, "Successfully assigned default/trainer to gpu-1"),
        ("trainer.2", "other", "0000", "an event of another namespace's trainer"),
    ]:
        event = {
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "trainer", "namespace": namespace, "uid": pod_uid},
            "reason": "Scheduled",
            "message": message,
            "type": "Normal",
            "source": {"component": "topoplace"},
        }
        store.create("events", event, namespace=namespace)
    _bind(kube_api, "trainer")
    described = await kubectl.ok("describe", "pod", "trainer")
    conditions = described.split("Conditions:")[1].split("Volumes:")[0].split()
    assert conditions[conditions.index("PodScheduled") + 1] == "True"
    assert "Node:         gpu-1" in described
    events = described.split("Events:")[1]
    assert "Successfully assigned default/trainer to gpu-1" in events and "topoplace" in events
    assert "another namespace" not in events


async def test_wait_for_pod_scheduled_returns_when_the_pod_is_bound(kubectl: Kubectl, kube_api: KubeApiServer) -> None:
    await kubectl.ok("create", "-f", "-", stdin=NODE_AND_POD)
    waiting = await kubectl.start("wait", "--for=condition=PodScheduled", "pod/trainer", "--timeout=60s", "-v=6")
    try:
        await read_until(waiting.stderr, "watch=true")  # kubectl is watching the pod now
        assert waiting.returncode is None
        _bind(kube_api, "trainer")
        out, _ = await asyncio.wait_for(waiting.communicate(), 60)
    finally:
        if waiting.returncode is None:
            waiting.kill()
            await waiting.wait()
    assert waiting.returncode == 0 and out.decode().strip() == "pod/trainer condition met"


async def test_watch_prints_a_row_per_change(kubectl: Kubectl, kube_api: KubeApiServer) -> None:
    await kubectl.ok("create", "-f", "-", stdin=NODE_AND_POD)
    watching = await kubectl.start("get", "pods", "-w", "-o", "wide", "--output-watch-events")
    try:
        seen = await read_until(watching.stdout, "trainer")
        assert seen[0].split()[:3] == ["EVENT", "NAME", "READY"]
        kube_api.store.create("pods", _pod("second"), namespace="default")
        assert (await read_until(watching.stdout, "second"))[-1].split()[:1] == ["ADDED"]
        _bind(kube_api, "second")
        bound = (await read_until(watching.stdout, "second"))[-1].split()
        assert bound[0] == "MODIFIED" and "Running" in bound and "gpu-1" in bound
        kube_api.store.delete("pods", "second", namespace="default")
        assert (await read_until(watching.stdout, "second"))[-1].split()[0] == "DELETED"
    finally:
        watching.kill()
        await watching.wait()


async def test_delete_by_name_and_from_the_file(kubectl: Kubectl, kube_api: KubeApiServer) -> None:
    await kubectl.ok("create", "-f", "-", stdin=NODE_AND_POD)
    assert (await kubectl.ok("delete", "pod", "trainer")).strip() == 'pod "trainer" deleted'
    assert kube_api.store.list("pods")[0] == []
    missing = await kubectl("delete", "pod", "trainer")
    assert missing.code != 0 and 'pods "trainer" not found' in missing.err
    gone = await kubectl.ok("delete", "-f", "-", "--ignore-not-found", stdin=NODE_AND_POD)
    assert gone.strip() == 'node "gpu-1" deleted'
    assert kube_api.store.list("nodes")[0] == []


async def test_get_hypernodes_and_podgroups_by_name_and_short_name(kubectl: Kubectl) -> None:
    await kubectl.ok("create", "-f", "-", stdin=VOLCANO)
    leaf = rows(await kubectl.ok("get", "hypernodes"))["leaf-1"]
    assert (leaf["TIER"], leaf["TIERNAME"]) == ("1", "leaf")
    assert "leaf-1" in rows(await kubectl.ok("get", "hn", "-o", "wide"))
    group = rows(await kubectl.ok("get", "podgroups", "-o", "wide"))["train"]
    assert (group["MINMEMBER"], group["QUEUE"]) == ("4", "research")
    assert "QUEUE" not in rows(await kubectl.ok("get", "pg"))["train"]
    as_yaml = await kubectl.ok("get", "podgroup", "train", "-o", "jsonpath={.spec.minMember}")
    assert as_yaml == "4"


async def test_the_demos_kubectl_command_shows_its_cluster(
    kube_api: KubeApiServer, kube_client: object, tmp_path: Path
) -> None:
    from topoplace.dev.demo import cluster as demo_cluster
    from topoplace.dev.demo.runner import kubectl_command, seed_cluster

    cluster = demo_cluster.default_cluster()
    await seed_cluster(kube_client, cluster)  # type: ignore[arg-type]
    command = shlex.split(kubectl_command(kube_api.url))
    assert command[0] == "kubectl"
    proc = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl",
        *command[1:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KUBECACHEDIR": str(tmp_path / "cache")},  # no other server's cache on this port
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    shown = out.decode()
    assert all(f"node/{node.name} " in shown for node in cluster.nodes)
    assert "hypernode.topology.volcano.sh/" in shown


async def test_apply_creates_then_patches_what_changed(kubectl: Kubectl, kube_api: KubeApiServer) -> None:
    pod = NODE_AND_POD.split("---")[1]
    assert (await kubectl.ok("apply", "-f", "-", stdin=pod)).strip() == "pod/trainer created"
    assert (await kubectl.ok("apply", "-f", "-", stdin=pod)).strip() == "pod/trainer unchanged"
    changed = pod.replace("image: busybox", "image: busybox:1.36")
    assert (await kubectl.ok("apply", "-f", "-", stdin=changed)).strip() == "pod/trainer configured"
    stored = kube_api.store.get("pods", "trainer", "default")
    assert stored["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
