"""`topoplace engine place|pick` and `topoplace topo show` on the shipped examples and fixtures."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topoplace.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER = EXAMPLES / "snapshot-nvidia-cluster.json"
UNSCHEDULABLE = EXAMPLES / "snapshot-nvidia-unschedulable.json"


def test_place_prints_the_decision_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    # h100-a has GPUs 6 and 7 free (NV18 on one NUMA node = 1820); no other node offers more than NV2.
    assert main(["engine", "place", "--snapshot", str(CLUSTER)]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] == "h100-a"
    assert [d["index"] for d in decision["devices"]] == [6, 7]
    assert decision["score_parts"]["set_score"] == 1820
    assert {a["node"] for a in decision["alternatives"]} == {"dgx1-a", "dgx1-b", "pcie-a", "pcie-b"}


def test_place_hami_mode_uses_hami_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(CLUSTER), "--mode", "hami"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert [d["index"] for d in decision["devices"]] == [7, 6]  # walked from the end


def test_place_explain_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "place", "--snapshot", str(CLUSTER), "--explain"]) == 0
    out = capsys.readouterr().out
    assert "h100-a" in out
    assert "cordoned" in out
    assert "other nodes, best first" in out


def test_place_unschedulable_example(capsys: pytest.CaptureFixture[str]) -> None:
    # Exit code 1, as `engine pick` when nothing fits: the decision is printed all the same.
    assert main(["engine", "place", "--snapshot", str(UNSCHEDULABLE)]) == 1
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] is None
    assert decision["reason"] == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were not ready,"
        " 1 node(s) were unschedulable."
    )


def test_place_names_the_bad_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"snapshot": {"nodes": []}, "request": {"uid": 5}}))
    assert main(["engine", "place", "--snapshot", str(bad)]) == 2
    assert "$.request.uid" in capsys.readouterr().err


def test_a_node_whose_pods_are_full_answers_no_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The node says it is full by `requested.pods` (its pod count left out): no node, exit 1.
    node = {"name": "full", "allocatable": {"cpu": "4", "pods": "2"}, "requested": {"pods": "2"}}
    given = tmp_path / "full.json"
    given.write_text(json.dumps({"snapshot": {"nodes": [node]}, "request": {"uid": "u", "requests": {"cpu": "1"}}}))
    assert main(["engine", "place", "--snapshot", str(given)]) == 1
    decision = json.loads(capsys.readouterr().out)
    assert decision["node"] is None
    assert decision["reason"] == "0/1 nodes are available: 1 Too many pods."


def test_pick_on_a_fixture_with_free_devices(capsys: pytest.CaptureFixture[str]) -> None:
    # DGX-1, GPU 1 busy: the NV2 pair (2,3) cuts the least idle link score (see test_nvidia_place).
    assert main(["engine", "pick", "--topology", "dgx1-v100", "--count", "2", "--free", "0,2,3,4,5,6,7"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["devices"] == [2, 3]
    assert out["score"] == 220  # NV2 on one NUMA node
    assert all(a["score"] <= 220 for a in out["alternatives"])


def test_pick_hami_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "dgx1-v100", "--count", "2", "--free", "0,2,3,4,5,6,7",
                 "--mode", "hami"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["devices"] == [7, 6]


def test_pick_reports_when_nothing_fits(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "pcie-4gpu", "--count", "3", "--free", "0,1"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["devices"] == []
    assert out["reason"].startswith("2 of 4 GPUs free, 3 requested")


def test_pick_rejects_an_unknown_device(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["engine", "pick", "--topology", "pcie-4gpu", "--count", "1", "--free", "0,9"]) == 2
    assert "--free: no device 9" in capsys.readouterr().err


def test_topo_show_prints_the_matrix_with_scores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--snapshot", str(CLUSTER), "--node", "dgx1-a"]) == 0
    out = capsys.readouterr().out
    assert "GPU7" in out
    assert "NV2 220" in out and "NV2 210" in out  # NODE within a socket, SYS across
    assert "SYS" in out
    assert " X " in out


def test_topo_show_from_a_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--topology", "dgx-h100"]) == 0
    assert "NV18" in capsys.readouterr().out


def test_topo_show_unknown_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--snapshot", str(CLUSTER), "--node", "nope"]) == 2
    assert "no node 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("snapshot-*.json")), ids=lambda p: p.name)
def test_every_example_snapshot_is_placed(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["engine", "place", "--snapshot", str(example)])
    decision = json.loads(capsys.readouterr().out)
    assert (code, decision["node"] is not None) in {(0, True), (1, False)}
    assert decision["node"] is not None or decision["reason"].startswith("0/")


# --- a plain `nvidia-smi topo -m` print, no model -------------------------------------------------

PRINTS = Path(__file__).resolve().parents[2] / "services" / "collector" / "node" / "fixtures"
LABEL_SCORES = {"PIX": 50, "PXB": 40, "PHB": 30, "NODE": 20, "SYS": 10}


def printed_labels(text: str) -> dict[tuple[int, int], str]:
    """The GPU-to-GPU labels of a print, read here independently of the collector's parser."""
    lines = [line.split() for line in text.splitlines()]
    header = next(t for t in lines if t[:1] == ["GPU0"] and t[1:2] != ["X"])
    gpu_columns = {j: int(name[3:]) for j, name in enumerate(header) if re.fullmatch(r"GPU\d+", name)}
    labels: dict[tuple[int, int], str] = {}
    for tokens in lines:
        if tokens and re.fullmatch(r"GPU\d+", tokens[0]) and tokens is not header:
            for j, peer in gpu_columns.items():
                labels[(int(tokens[0][3:]), peer)] = tokens[1 + j]
    return labels


def printed_cpu_affinity(text: str) -> dict[int, str]:
    """Each GPU's CPU Affinity column of a print."""
    lines = [line.split() for line in text.splitlines()]
    header = next(t for t in lines if t[:1] == ["GPU0"] and t[1:2] != ["X"])
    column = 1 + header.index("CPU")
    return {int(t[0][3:]): t[column] for t in lines if t and re.fullmatch(r"GPU\d+", t[0]) and t is not header}


def label_score(label: str, same_socket: bool = True) -> int:
    """A pair's score from its label; an NV# pair adds the PCIe level its sockets imply (NODE or SYS)."""
    if label.startswith("NV"):
        return 100 * int(label[2:]) + LABEL_SCORES["NODE" if same_socket else "SYS"]
    return LABEL_SCORES[label]


@pytest.mark.parametrize("print_file", sorted(PRINTS.glob("*.txt")), ids=lambda p: p.name)
def test_pick_answers_on_every_real_print_with_no_flag_but_count(
    print_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A copy under another name: a file the user pasted, not a shipped fixture with a model table.
    pasted = tmp_path / "my-box.txt"
    pasted.write_text(print_file.read_text())
    assert main(["engine", "pick", "--topology", str(pasted), "--count", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    labels = printed_labels(print_file.read_text())
    cpus = printed_cpu_affinity(print_file.read_text())
    a, b = out["devices"]
    best = max(label_score(label, cpus[i] == cpus[j]) for (i, j), label in labels.items() if i != j)
    assert label_score(labels[(a, b)], cpus[a] == cpus[b]) == best == out["score"]


def test_pick_takes_a_model_and_memory_for_a_print(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pasted = tmp_path / "rtx3090-4gpu-nv4.txt"
    pasted.write_text((PRINTS / "pcie-4gpu.txt").read_text())
    args = ["engine", "pick", "--topology", str(pasted), "--count", "2"]
    assert main([*args, "--model", "NVIDIA GeForce RTX 3090", "--memory-mib", "24576"]) == 0
    assert json.loads(capsys.readouterr().out)["devices"] == [0, 1]  # the NV12 pair
    with pytest.raises(SystemExit) as exited:
        main([*args, "--memory-mib", "0"])
    assert exited.value.code == 2
    assert "--memory-mib: must be positive" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "file box.txt: the print is empty"),
        ("hello\nworld\n", "file box.txt: no header line starting with GPU0"),
        ("\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tNV1\t X \n", "file box.txt: line 2: unknown link code in row GPU0"),
        ("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\n", "file box.txt: line 2: ragged row GPU0"),
    ],
    ids=["empty", "not-a-print", "unknown-code", "ragged"],
)
def test_a_print_that_does_not_parse_names_the_line_and_why(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pasted = tmp_path / "box.txt"
    pasted.write_text(text)
    for command in (["engine", "pick", "--count", "1"], ["topo", "show"]):
        assert main([*command, "--topology", str(pasted)]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert "--model" not in err  # the print is the problem, not a missing model


def test_topo_show_takes_a_print_with_no_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pasted = tmp_path / "box.txt"
    pasted.write_text((PRINTS / "dgx1-v100.txt").read_text())
    assert main(["topo", "show", "--topology", str(pasted)]) == 0
    assert "NV2 220" in capsys.readouterr().out


# --- topo show at 80 columns --------------------------------------------------------------------------


def sixteen_gpu_print() -> str:
    """16 GPUs: pairs on NVLink (NV4), PIX within a group of 4, NODE within a socket, SYS across."""

    def label(i: int, j: int) -> str:
        if i == j:
            return " X "
        if i // 2 == j // 2:
            return "NV4"
        if i // 4 == j // 4:
            return "PIX"
        return "NODE" if i // 8 == j // 8 else "SYS"

    names = [f"GPU{i}" for i in range(16)]
    rows = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity"]
    for i in range(16):
        cpus = "0-31" if i < 8 else "32-63"
        rows.append("\t".join([names[i], *(label(i, j) for j in range(16)), cpus, str(i // 8)]))
    return "\n".join(rows) + "\n"


def read_back(lines: list[str]) -> dict[tuple[int, int], str]:
    """The label matrix from `topo show`'s blocks (header lines start with blanks, rows with GPU<n>)."""
    found: dict[tuple[int, int], str] = {}
    columns: list[int] = []
    for line in lines:
        tokens = line.split()
        if line.startswith(" ") and tokens[0] == "NUMA":
            columns = [int(t[3:]) for t in tokens[1:]]
        elif tokens and re.fullmatch(r"GPU\d+", tokens[0]):
            cells: list[str] = []
            for token in tokens[2:]:  # a cell is a label, maybe followed by its score
                if token.isdigit() and cells:
                    cells[-1] += f" {token}"
                else:
                    cells.append(token)
            for column, value in zip(columns, cells, strict=True):
                found[(int(tokens[0][3:]), column)] = value.split()[0]
    return found


def test_topo_show_of_a_16_gpu_node_fits_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pasted = tmp_path / "sixteen.txt"
    pasted.write_text(sixteen_gpu_print())
    assert main(["topo", "show", "--topology", str(pasted)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 80
    expected = {(i, j): label.strip() for (i, j), label in printed_labels(sixteen_gpu_print()).items()}
    assert read_back(lines) == expected  # every pair once, each under its own column


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_topo_show_fits_any_width_it_is_given(width: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topo", "show", "--topology", "dgx1-v100", "--width", str(width)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert len(read_back(lines)) == 64


# --- engine place: a snapshot that contradicts itself is refused, naming the field --------------------


def broken_cluster(path: Path, break_it: Callable[[dict[str, Any]], None]) -> Path:
    given = json.loads(CLUSTER.read_text())
    break_it(given["snapshot"]["nodes"][0])
    path.write_text(json.dumps(given))
    return path


@pytest.mark.parametrize(
    ("break_it", "field"),
    [
        (lambda n: n["devices"].append(dict(n["devices"][0])), "snapshot.nodes[0].devices[8].index"),
        (lambda n: n["links"].append({"src": 0, "dst": 42, "nvlinks": 1}), ".dst: no device 42"),
        (lambda n: n["allocations"].append({"pod_uid": "p", "index": 42}), ".index: no device 42"),
        (lambda n: n["devices"][1].update(memory_mib=-1), "snapshot.nodes[0].devices[1].memory_mib"),
    ],
    ids=["duplicate-index", "link-to-nothing", "allocation-on-nothing", "negative-memory"],
)
def test_place_refuses_an_inconsistent_snapshot(
    break_it: Callable[[dict[str, Any]], None], field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = broken_cluster(tmp_path / "bad.json", break_it)
    assert main(["engine", "place", "--snapshot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert field in err and "bad.json" in err


def test_the_parser_knows_every_engine_mode() -> None:
    from engine import Mode
    from topoplace.commands.engine import MODES

    assert set(MODES) == {m.value for m in Mode}


@pytest.mark.parametrize(
    ("example", "tier", "hypernode"),
    [
        ("gang-volcano.json", 2, "spine-1"),
        ("gang-kueue.json", 1, "block-0/rack-1"),
        ("gang-nvl72.json", 0, "nvlink:nvl72-rack1.0"),
    ],
)
def test_gang_examples_are_placed_in_one_domain(
    example: str, tier: int, hypernode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / example
    assert main(["engine", "place", "--snapshot", str(path)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["placed"] is True
    assert (answer["tier"], answer["hypernode"]) == (tier, hypernode)
    nodes = [p["node"] for p in answer["pods"]]
    assert len(set(nodes)) == len(nodes)  # every member on a node of its own (whole nodes or whole trays)
    assert all(p["devices"] for p in answer["pods"])


def test_a_gang_that_cannot_fit_exits_1_with_every_member_unplaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = json.loads((Path(__file__).resolve().parents[2] / "examples" / "gang-volcano.json").read_text())
    given["gang"]["podgroup"]["spec"]["networkTopology"]["highestTierAllowed"] = 1
    path = tmp_path / "gang.json"
    path.write_text(json.dumps(given))
    assert main(["engine", "place", "--snapshot", str(path)]) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["placed"] is False
    assert all(p["node"] is None for p in answer["pods"])
    assert "no hypernode of tier <= 1" in answer["reason"]
    assert answer["refused_tiers"] == [
        {"tier": 1, "tier_name": "leaf", "reason": "at most 2 of 4 pending member(s) fit in one hypernode (tor-2)"}
    ]
    head, histogram = answer["reason"].rsplit(" nodes are available: ", 1)
    nodes = int(head.rsplit("0/", 1)[1])
    assert sum(int(entry.split(" ", 1)[0]) for entry in histogram.rstrip(".").split(", ")) == nodes


def test_a_gang_placed_above_the_lowest_tier_says_why_not_lower(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "gang-volcano.json"
    assert main(["engine", "place", "--snapshot", str(path), "--explain"]) == 0
    out = capsys.readouterr().out
    assert "gang ml/llm-train in spine-1 (tier 2)" in out
    assert "not tier 1 (leaf): at most 2 of 4 pending member(s) fit in one hypernode (tor-2)" in out


def test_a_snapshot_with_both_a_request_and_a_gang_is_refused(tmp_path: Path) -> None:
    given = json.loads((Path(__file__).resolve().parents[2] / "examples" / "gang-kueue.json").read_text())
    given["request"] = given["gang"]["pods"][0]
    path = tmp_path / "both.json"
    path.write_text(json.dumps(given))
    assert main(["engine", "place", "--snapshot", str(path)]) == 2


def _snapshot_with(tmp_path: Path, node: str, labels: dict[str, str], annotations: dict[str, str]) -> Path:
    given = json.loads(CLUSTER.read_text())
    for entry in given["snapshot"]["nodes"]:
        if entry["name"] == node:
            entry["labels"] = labels
            entry["annotations"] = annotations
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(given))
    return path


def test_topo_show_says_which_enforcement_applies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOPOPLACE_ENFORCEMENT", raising=False)
    hami_node = _snapshot_with(tmp_path, "dgx1-a", {}, {"hami.io/node-nvidia-register": "[]"})
    assert main(["topo", "show", "--snapshot", str(hami_node), "--node", "dgx1-a", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "enforcement: hami (detected: hami.io/node-nvidia-register)" in out
    assert main(["topo", "show", "--snapshot", str(hami_node), "--node", "dgx1-b", "--width", "200"]) == 0
    assert "enforcement: device-plugin (default); plain device plugin: only the node is enforced" in (
        capsys.readouterr().out
    )
    monkeypatch.setenv("TOPOPLACE_ENFORCEMENT", "dra")
    assert main(["topo", "show", "--snapshot", str(hami_node), "--node", "dgx1-b", "--width", "200"]) == 0
    assert "enforcement: dra (default, TOPOPLACE_ENFORCEMENT)" in capsys.readouterr().out


def test_place_explain_says_how_the_chosen_nodes_devices_are_enforced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOPOPLACE_ENFORCEMENT", raising=False)
    labelled = _snapshot_with(
        tmp_path, "h100-a", {"topoplace.io/enforcement": "hami"}, {"hami.io/device-cordon": "GPU-nope"}
    )
    assert main(["engine", "place", "--snapshot", str(labelled), "--explain"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "h100-a enforcement: hami (label topoplace.io/enforcement)" in out
    assert "cordoned by hami.io/device-cordon: GPU-nope" in out
