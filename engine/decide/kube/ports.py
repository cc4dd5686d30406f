"""Host ports, as kube-scheduler's NodePorts plugin checks them (framework.HostPortInfo).

A pod's wanted ports are its containers' (and restartable init containers')
ports with hostPort > 0; a node's used ports are those of the pods running on
it. A wanted (hostIP, protocol, hostPort) conflicts with a used one of the
same protocol and port when either binds every address (hostIP 0.0.0.0, or
empty) or both name the same address. An empty protocol is TCP. The reason,
word for word: "node(s) didn't have free ports for the requested pod ports".
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.kube import BIND_ALL_HOST_IP, HostPort

NODE_PORTS = "NodePorts"
NODE_PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"
_DEFAULT_PROTOCOL = "TCP"

ProtocolPort = tuple[str, int]


def _sanitised(port: HostPort) -> tuple[str, str, int]:
    return (port.host_ip or BIND_ALL_HOST_IP, port.protocol or _DEFAULT_PROTOCOL, port.port)


class UsedPorts:
    """The host ports a node's pods hold, keyed for kube's two lookups (built once per node state)."""

    __slots__ = ("_any_address", "_by_address")

    def __init__(self, ports: Iterable[HostPort] = ()) -> None:
        by_address: set[tuple[str, str, int]] = set()
        any_address: set[ProtocolPort] = set()
        for port in ports:
            if port.port <= 0:
                continue  # kube's HostPortInfo.Add ignores them
            address, protocol, number = _sanitised(port)
            by_address.add((address, protocol, number))
            any_address.add((protocol, number))
        self._by_address = frozenset(by_address)
        self._any_address = frozenset(any_address)

    def __bool__(self) -> bool:
        return bool(self._by_address)

    def conflicts(self, wanted: HostPort) -> bool:
        """HostPortInfo.CheckConflict: 0.0.0.0 meets every address; any other meets itself and 0.0.0.0."""
        if wanted.port <= 0:
            return False
        address, protocol, number = _sanitised(wanted)
        if address == BIND_ALL_HOST_IP:
            return (protocol, number) in self._any_address
        return (BIND_ALL_HOST_IP, protocol, number) in self._by_address or (
            address,
            protocol,
            number,
        ) in self._by_address


def fits_ports(wanted: Iterable[HostPort], used: UsedPorts | None) -> bool:
    """NodePorts' filter: none of the pod's host ports is taken on the node (None: none is used)."""
    return not used or not any(used.conflicts(port) for port in wanted)
