"""The host ports a pod takes on its node, as kube-scheduler's NodePorts reads them. Pure.

kube's GetHostPorts: every container's and restartable init container's (sidecar's) ports with
hostPort > 0, as (hostIP, protocol, hostPort); an empty protocol is TCP, an empty hostIP every
address. A pending pod carries them so the placer keeps it off nodes where one is taken; a pod on a
node (of any scheduler) carries them so the placer counts them taken there. A port the API server
would refuse is left out and reported as (field, reason) (translate.py's rule); the rest go.
`topoplace engine place --cluster` reads Pod objects through the same function.
"""

from __future__ import annotations

from schemas.errors import FieldError
from schemas.kube import HostPort
from services.collector.cluster.objects import Pod

SIDECAR_RESTART_POLICY = "Always"  # an init container with it keeps running, and holds its ports

FieldProblem = tuple[str, str]  # the field, and why it was left out


def host_ports(pod: Pod) -> tuple[tuple[HostPort, ...], list[FieldProblem]]:
    """The pod's host ports, containers' in order after its sidecars', and the ports left out."""
    spec = pod.spec
    containers = [
        ("initContainers", i, c)
        for i, c in enumerate(spec.init_containers)
        if c.restart_policy == SIDECAR_RESTART_POLICY
    ]
    containers += [("containers", i, c) for i, c in enumerate(spec.containers)]
    found: list[HostPort] = []
    problems: list[FieldProblem] = []
    for where, i, container in containers:
        for j, port in enumerate(container.ports):
            if port.host_port <= 0:
                continue  # a container port only (kube's GetHostPorts skips it)
            try:
                found.append(HostPort(port=port.host_port, protocol=port.protocol or "TCP", host_ip=port.host_ip))
            except FieldError as exc:
                problems.append((f"spec.{where}[{i}].ports[{j}]", str(exc)))
    return tuple(found), problems
