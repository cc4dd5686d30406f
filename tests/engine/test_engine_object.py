"""The engine is an object: what it remembers is its own, its vendors come from a registry that fails loudly,
and the engine's modules hold no mutable state of their own."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import msgspec
import pytest
from engine_builders import fixture_node, pod
from network_builders import volcano_example
from random_clusters import random_cluster, random_pod

from engine import Engine, Limits, Mode, PodRequest, RequestError, Snapshot, VendorRegistry
from engine.cluster.network import build_tree
from engine.decide.gang import GangRequest
from engine.node.registry import VendorMissing
from engine.node.vendors import VENDOR_PACKAGES
from services.placer.decide import Decider

ENGINE_ROOT = Path(__file__).resolve().parents[2] / "engine"


def _decisions(placer: Engine, snap: Snapshot, pods: list[PodRequest], mode: Mode) -> list[bytes]:
    """Each pod on the snapshot, the same pods again over an index the engine keeps, with runners-up."""
    out: list[bytes] = []
    index = placer.new_index()
    for node_state in snap.nodes:
        index.upsert(node_state)
    for request in pods + pods:  # twice: the second round is answered from the tables, where there are any
        try:
            out.append(msgspec.json.encode(placer.place(snap, request, mode, explain=True)))
            out.append(msgspec.json.encode(placer.place_in(index, request, mode, runners_up=3)))
        except RequestError as exc:
            out.append(f"RequestError {exc}".encode())
    return out


@pytest.mark.parametrize("mode", [Mode.DEFAULT, Mode.HAMI])
@pytest.mark.parametrize("seed", range(4))
def test_two_engines_in_one_process_one_with_tables_one_without_answer_alike(seed: int, mode: Mode) -> None:
    rng = random.Random(seed)
    snap = random_cluster(rng, 30)
    pods = [random_pod(rng, f"pod-{j}") for j in range(8)]
    cached = Engine()
    afresh = Engine(limits=Limits(caches=False))
    # Interleaved, in one process: neither engine's state may reach the other's answers.
    answers_cached = _decisions(cached, snap, pods, mode)
    answers_afresh = _decisions(afresh, snap, pods, mode)
    assert answers_cached == answers_afresh
    assert sum(b.startswith(b'{"node":"') for b in answers_cached) >= 4, "the sample should place some pods"
    assert cached.memo.entries() > 0  # the one engine kept answers...
    assert afresh.memo.entries() == 0  # ...the other kept none, and shares no table with it
    before = cached.memo.entries()
    _decisions(Engine(limits=Limits(caches=False)), snap, pods, mode)
    assert cached.memo.entries() == before  # a third engine's work lands in no table of the first


def test_two_engines_place_a_gang_alike_with_and_without_tables() -> None:
    names = [f"node{i}" for i in range(8)]
    tree = build_tree(volcano_example(), {n: {} for n in names}).tree
    nodes = [fixture_node(n, "dgx-h100", busy=[0, 1, 2, 3] if n in ("node0", "node3") else []) for n in names]
    members = [PodRequest(uid=f"m{i}", name=f"m{i}", requests={"nvidia.com/gpu": "4"}) for i in range(3)]
    gang = GangRequest(name="ns/job", pods=tuple(members))
    answers = []
    for placer in (Engine(), Engine(limits=Limits(caches=False))):
        index = placer.new_index()
        for node_state in nodes:
            index.upsert(node_state)
        answers.append(msgspec.json.encode(placer.place_gang(index, tree, gang)))
    assert answers[0] == answers[1]
    assert b'"placed":true' in answers[0]


def test_clearing_an_engine_forgets_its_answers_but_not_how_to_give_them() -> None:
    placer = Engine()
    snap = random_cluster(random.Random(3), 12)
    request = random_pod(random.Random(4), "p")
    first = placer.place(snap, request)
    assert placer.memo.entries() > 0
    placer.clear()
    assert placer.memo.entries() == 0
    assert placer.place(snap, request) == first


def test_two_placers_in_one_process_keep_separate_engines() -> None:
    a, b = Decider(), Decider()
    assert a.engine is not b.engine and a.engine.memo is not b.engine.memo
    a.engine.place(Snapshot(nodes=(fixture_node("n0", "dgx-h100"),)), pod(1))
    assert b.engine.memo.entries() == 0


def test_a_registered_vendor_package_that_is_missing_fails_loudly() -> None:
    with pytest.raises(VendorMissing, match=r"'engine\.node\.vendors\.gaudi' is registered but cannot be imported"):
        VendorRegistry.of((*VENDOR_PACKAGES, "engine.node.vendors.gaudi"))


def test_a_vendor_package_without_a_plugin_class_fails_loudly() -> None:
    with pytest.raises(VendorMissing, match=r"'engine\.node\.vendors' exports no Plugin class"):
        VendorRegistry.of(("engine.node.vendors",))


def test_the_registry_names_each_vendor_once_in_order() -> None:
    registry = VendorRegistry.of(VENDOR_PACKAGES)
    assert registry.names == ("nvidia", "metax", "neuron")
    with pytest.raises(ValueError, match="registered twice"):
        VendorRegistry.of((*VENDOR_PACKAGES, VENDOR_PACKAGES[0]))
    assert Engine(registry).vendors.named("metax").name == "metax"
    with pytest.raises(VendorMissing, match="no vendor 'gaudi'"):
        Engine(registry).vendors.named("gaudi")


def test_an_engine_offers_only_the_vendors_of_its_registry() -> None:
    only_nvidia = Engine(VendorRegistry.of(("engine.node.vendors.nvidia",)))
    snap = Snapshot(nodes=(fixture_node("mx", "metax-8gpu-2zone"),))
    metax = PodRequest(uid="m", requests={"metax-tech.com/gpu": "1"})
    assert Engine().place(snap, metax).node == "mx"
    assert only_nvidia.place(snap, metax).node == "mx"  # asks for no device of its vendors: node rules alone
    assert only_nvidia.place(snap, metax).devices == ()


# --- no module-level mutable state ------------------------------------------------------------------

# Module-level values that are immutable although built by a call.
IMMUTABLE_CALLS = (
    "frozenset",
    "tuple",
    "MappingProxyType",
    "re.compile",
    "TypeVar",
    "VendorRegistry.of",
    "float",
    "msgspec.json.Decoder",
)
IMMUTABLE_STRUCTS = ("NodeMiss", "NodeFit", "Unfit", "NodeScore", "SetChoice", "Taint")


def _module_state(path: Path) -> list[str]:
    """Module-level names bound to a mutable value (a dict, list or set display, or an object made by a call
    that is not known to be immutable), and functions memoised by a decorator."""
    found: list[str] = []
    for statement in ast.parse(path.read_text()).body:
        if isinstance(statement, ast.FunctionDef):
            found += [
                f"{statement.name}: @{ast.unparse(d)}" for d in statement.decorator_list if "cache" in ast.unparse(d)
            ]
            continue
        if not isinstance(statement, ast.Assign | ast.AnnAssign) or statement.value is None:
            continue
        target = ast.unparse(statement.targets[0] if isinstance(statement, ast.Assign) else statement.target)
        if target == "__all__":
            continue
        value = statement.value
        mutable_display = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp)
        call = ast.unparse(value.func) if isinstance(value, ast.Call) else None
        if mutable_display or (call is not None and call not in IMMUTABLE_CALLS and call not in IMMUTABLE_STRUCTS):
            found.append(f"{target} = {ast.unparse(value)[:60]}")
    return found


def test_no_engine_module_holds_mutable_state_of_its_own() -> None:
    modules = sorted(ENGINE_ROOT.rglob("*.py"))
    assert len(modules) > 40
    found = {str(p.relative_to(ENGINE_ROOT)): _module_state(p) for p in modules}
    assert {path: state for path, state in found.items() if state} == {}
