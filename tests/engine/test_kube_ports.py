"""NodePorts: a pod's host ports against those its node's pods hold, from kube-scheduler's
node_ports_test.go table (HostPortInfo's semantics: 0.0.0.0 or an empty hostIP binds every address)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Mode, NodeState, PodRequest, Snapshot, place
from engine.decide.kube.filters import CompiledPodRules, NodeFacts, PodFacts
from engine.decide.kube.ports import NODE_PORTS_REASON, UsedPorts, fits_ports
from schemas.errors import FieldError
from schemas.kube import HostPort


def ports(*specs: str) -> tuple[HostPort, ...]:
    """ "UDP/127.0.0.1/8080" -> HostPort (an empty part: kube's empty field)."""
    out = []
    for spec in specs:
        protocol, address, number = spec.split("/")
        out.append(HostPort(protocol=protocol, host_ip=address, port=int(number)))
    return tuple(out)


@pytest.mark.parametrize(
    ("wanted", "used", "fits"),
    [
        # nothing running
        (ports("TCP/127.0.0.1/8080"), (), True),
        # the same port, protocol and address
        (ports("UDP/127.0.0.1/8080"), ports("UDP/127.0.0.1/8080"), False),
        (ports("TCP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8080"), False),
        # another address
        (ports("TCP/127.0.0.1/8080"), ports("TCP/127.0.0.2/8080"), True),
        # another protocol
        (ports("UDP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8080"), True),
        # one of several wanted ports is taken
        (ports("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ports("UDP/127.0.0.1/8080"), False),
        (ports("TCP/127.0.0.1/8001", "TCP/127.0.0.1/8080"), ports("TCP/127.0.0.1/8001"), False),
        # a wanted 0.0.0.0 meets the port on any address
        (ports("TCP/0.0.0.0/8001"), ports("TCP/127.0.0.1/8001"), False),
        (ports("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"), ports("TCP/127.0.0.1/8001"), False),
        # a used 0.0.0.0 meets any wanted address
        (ports("TCP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001"), False),
        # ... of its own protocol only
        (ports("UDP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001"), True),
        (ports("UDP/127.0.0.1/8001"), ports("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"), False),
        # an empty hostIP is 0.0.0.0, an empty protocol TCP (HostPortInfo.sanitize), on either side
        (ports("TCP//8001"), ports("TCP/127.0.0.1/8001"), False),
        (ports("TCP/127.0.0.1/8001"), ports("TCP//8001"), False),
        (ports("/127.0.0.1/8001"), ports("TCP/127.0.0.1/8001"), False),
        (ports("UDP/127.0.0.1/8001"), ports("//8001"), True),
        # another port
        (ports("TCP/0.0.0.0/8002"), ports("TCP/0.0.0.0/8001"), True),
    ],
)
def test_host_port_conflicts(wanted: tuple[HostPort, ...], used: tuple[HostPort, ...], fits: bool) -> None:
    assert fits_ports(wanted, UsedPorts(used)) is fits
    facts = NodeFacts(name="n1", used_ports=UsedPorts(used))
    expected = None if fits else [NODE_PORTS_REASON]
    assert CompiledPodRules(PodFacts(host_ports=wanted)).first_failure(facts) == expected


def test_ports_come_before_resources_and_after_affinity() -> None:
    full = NodeFacts(name="n1", allocatable={"pods": 0}, used_ports=UsedPorts(ports("TCP//80")))
    assert CompiledPodRules(PodFacts(host_ports=ports("TCP//80"))).first_failure(full) == [NODE_PORTS_REASON]
    elsewhere = PodFacts(host_ports=ports("TCP//80"), node_selector={"zone": "b"})
    assert CompiledPodRules(elsewhere).first_failure(full) == ["node(s) didn't match Pod's node affinity/selector"]


@pytest.mark.parametrize("bad", [{"port": 0}, {"port": 70_000}, {"port": 80, "protocol": "HTTP"}])
def test_a_bad_host_port_names_its_field(bad: dict[str, object]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(bad, HostPort)
    with pytest.raises(FieldError):
        HostPort(**bad)  # type: ignore[arg-type]


def test_the_engine_places_the_pod_where_its_port_is_free() -> None:
    taken = NodeState(name="a", host_ports=ports("TCP//8080"))
    other_address = NodeState(name="b", host_ports=ports("TCP/10.0.0.2/8080"))
    free = NodeState(name="c")
    pod = PodRequest(uid="p", host_ports=ports("TCP/10.0.0.1/8080"))
    decision = place(Snapshot(nodes=(taken, other_address, free)), pod, Mode.DEFAULT, explain=True)
    assert decision.node == "b"  # a's 0.0.0.0 meets 10.0.0.1; b's other address does not
    assert {v.node: v.fits for v in decision.alternatives} == {"a": False, "c": True}
    everywhere = PodRequest(uid="p", host_ports=ports("TCP//8080"))
    assert place(Snapshot(nodes=(taken, other_address)), everywhere, Mode.DEFAULT).reason == (
        f"0/2 nodes are available: 2 {NODE_PORTS_REASON}."
    )


host_ports = st.builds(
    HostPort,
    port=st.sampled_from([53, 80, 8080]),
    protocol=st.sampled_from(["TCP", "UDP", ""]),
    host_ip=st.sampled_from(["", "0.0.0.0", "10.0.0.1", "10.0.0.2"]),
)


def _same_port(a: HostPort, b: HostPort) -> bool:
    """Two ports meet: one port and protocol (empty is TCP), and an address in common (0.0.0.0 or empty: all)."""
    every = ("", "0.0.0.0")
    same_address = a.host_ip in every or b.host_ip in every or a.host_ip == b.host_ip
    return a.port == b.port and (a.protocol or "TCP") == (b.protocol or "TCP") and same_address


@given(st.lists(host_ports, max_size=4), st.lists(host_ports, max_size=6))
def test_a_pod_fits_exactly_when_no_port_meets_a_used_one(wanted: list[HostPort], used: list[HostPort]) -> None:
    expected = not any(_same_port(w, u) for w in wanted for u in used)
    assert fits_ports(wanted, UsedPorts(used)) is expected
    # meeting is symmetric: swapping who runs and who asks changes nothing, one port against one
    for w in wanted:
        for u in used:
            assert UsedPorts([u]).conflicts(w) is UsedPorts([w]).conflicts(u)
