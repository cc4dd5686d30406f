"""The `nvidia-smi topo -m` parser: every shipped real print, spaces for tabs, and the bad-input errors."""

from __future__ import annotations

import re

import pytest
from collector_prints import PRINTS, gpu_cells, print_text

from schemas.topology import Link, PcieLevel
from services.collector.node.topo_matrix import TopoMatrixError, parse_topo_matrix


def parse(text: str, **kwargs: object) -> object:
    return parse_topo_matrix(text, node="n1", machine_type="test", model="M", memory_mib=1024, **kwargs)  # type: ignore[arg-type]


def links_by_pair(links: tuple[Link, ...]) -> dict[tuple[int, int], Link]:
    return {(link.src, link.dst): link for link in links}


@pytest.mark.parametrize("name", sorted(PRINTS))
def test_every_cell_of_every_real_print_becomes_a_directed_link(name: str) -> None:
    text = print_text(name)
    cells = gpu_cells(text)
    gpus = sorted({row for row, _ in cells})
    topology = parse(text)

    assert [d.index for d in topology.devices] == gpus
    pairs = links_by_pair(topology.links)
    assert len(topology.links) == len(pairs) == len(gpus) * (len(gpus) - 1)
    for (row, column), code in cells.items():
        if row == column:
            assert code == "X"
            continue
        link = pairs[(row, column)]
        if code.startswith("NV"):
            assert (link.nvlinks, link.pcie) == (int(code[2:]), None)
        else:
            assert (link.nvlinks, link.pcie) == (0, PcieLevel(code))


def test_dgx1_hybrid_cube_mesh_single_and_double_links() -> None:
    pairs = links_by_pair(parse(print_text("dgx1-v100")).links)
    assert pairs[(0, 3)].nvlinks == 2 and pairs[(3, 0)].nvlinks == 2
    assert pairs[(0, 1)].nvlinks == 1
    assert pairs[(0, 5)].pcie is PcieLevel.SYS and pairs[(0, 5)].nvlinks == 0
    # Hybrid cube-mesh: each V100 uses its 6 NVLinks on 4 peers (two single, two double).
    for gpu in range(8):
        counts = sorted(link.nvlinks for (src, _), link in pairs.items() if src == gpu and link.nvlinks)
        assert counts == [1, 1, 2, 2]


def test_dgx1_numa_nodes_are_inferred_from_cpu_affinity_groups() -> None:
    # The DGX-1 print has no NUMA Affinity column: GPUs 0-3 print CPUs 0-19,40-59 (socket 0), 4-7 CPUs 20-39,60-79.
    topology = parse(print_text("dgx1-v100"))
    assert [d.numa_node for d in topology.devices] == [0, 0, 0, 0, 1, 1, 1, 1]


def numa_column(text: str) -> dict[int, int]:
    """The NUMA Affinity value printed on each GPU row (the column after the CPU list)."""
    found = {}
    for line in text.splitlines():
        tokens = line.split()
        if tokens and re.fullmatch(r"GPU\d+", tokens[0]) and tokens[1:2] != ["GPU1"]:
            cpu = next(i for i, t in enumerate(tokens) if re.fullmatch(r"\d+-\d+(,\d+-\d+)*", t))
            found[int(tokens[0][3:])] = int(tokens[cpu + 1])
    return found


@pytest.mark.parametrize("name", ["dgx-h100", "pcie-8gpu-2socket", "pcie-4gpu"])
def test_numa_node_comes_from_the_numa_affinity_column(name: str) -> None:
    text = print_text(name)
    topology = parse(text)
    assert {d.index: d.numa_node for d in topology.devices} == numa_column(text)


def test_h100_all_nv18_is_the_nvswitch_pattern() -> None:
    topology = parse(print_text("dgx-h100"))
    assert {d.nvswitch_links for d in topology.devices} == {18}
    assert {link.nvlinks for link in topology.links} == {18}


@pytest.mark.parametrize("name", ["dgx1-v100", "pcie-4gpu", "pcie-8gpu-2socket"])
def test_direct_links_are_not_taken_for_an_nvswitch(name: str) -> None:
    assert {d.nvswitch_links for d in parse(print_text(name)).devices} == {0}


def test_four_gpus_all_nv4_are_direct_links_not_a_switch() -> None:
    # HGX A100 4-GPU: every pair NV4, 12 links per GPU in all -- within what one GPU has.
    text = "\tGPU0\tGPU1\tGPU2\tGPU3\n" + "".join(
        f"GPU{r}\t" + "\t".join(" X " if r == c else "NV4" for c in range(4)) + "\n" for r in range(4)
    )
    assert {d.nvswitch_links for d in parse(text).devices} == {0}


def test_spaces_instead_of_tabs_give_the_same_topology() -> None:
    text = print_text("dgx1-v100")
    spaced = "\n".join("   ".join(line.split("\t")) for line in text.splitlines())
    assert "\t" not in spaced
    assert parse(spaced) == parse(text)


def test_the_pcie_print_pasted_with_spaces_is_read() -> None:
    text = print_text("pcie-8gpu-2socket")
    assert "\t" not in text  # published with spaces
    pairs = links_by_pair(parse(text).links)
    assert pairs[(0, 1)].pcie is PcieLevel.PIX and pairs[(0, 2)].pcie is PcieLevel.PHB
    assert pairs[(3, 4)].pcie is PcieLevel.SYS


def test_the_truncated_nic_rows_of_a_published_print_are_ignored() -> None:
    text = print_text("dgx-h100")
    assert text.rstrip().endswith("\u2026")  # the source cut the NIC block short
    assert len(parse(text).devices) == 8


def test_model_memory_and_identity_are_those_given() -> None:
    topology = parse_topo_matrix(print_text("pcie-4gpu"), node="box", machine_type="pcie-4gpu", model="A", memory_mib=7)
    assert {(d.model, d.memory_mib) for d in topology.devices} == {("A", 7)}
    assert topology.node == "box" and topology.machine_type == "pcie-4gpu"
    assert len({d.uuid for d in topology.devices}) == 4
    again = parse_topo_matrix(print_text("pcie-4gpu"), node="box", machine_type="pcie-4gpu", model="A", memory_mib=7)
    other = parse_topo_matrix(print_text("pcie-4gpu"), node="box2", machine_type="pcie-4gpu", model="A", memory_mib=7)
    assert [d.uuid for d in again.devices] == [d.uuid for d in topology.devices]
    assert not {d.uuid for d in other.devices} & {d.uuid for d in topology.devices}


def test_old_soc_code_means_sys() -> None:
    text = "GPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n"
    topology = parse(text)
    assert {link.pcie for link in topology.links} == {PcieLevel.SYS}
    assert [d.numa_node for d in topology.devices] == [0, 1]


# --- bad input -----------------------------------------------------------------------------

SMALL = (
    "# a comment\n"
    "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
    "GPU0\t X \tNV2\tSYS\t0-7\n"
    "GPU1\tNV2\t X \tSYS\t0-7\n"
    "GPU2\tSYS\tSYS\t X \t8-15\n"
)


def test_the_small_print_is_valid() -> None:
    assert len(parse(SMALL).devices) == 3


def test_unknown_code_names_line_and_token() -> None:
    bad = SMALL.replace("GPU1\tNV2\t X \tSYS", "GPU1\tNV2\t X \tQPI")
    with pytest.raises(TopoMatrixError) as caught:
        parse(bad)
    assert caught.value.line == 4 and caught.value.token == "QPI"
    assert "line 4" in str(caught.value) and "'QPI'" in str(caught.value) and "GPU2" in str(caught.value)


def test_ragged_row_with_a_missing_entry() -> None:
    bad = SMALL.replace("GPU2\tSYS\tSYS\t X \t8-15", "GPU2\tSYS\t X \t8-15")
    with pytest.raises(TopoMatrixError, match=r"line 5: ragged row GPU2"):
        parse(bad)


def test_ragged_row_with_an_extra_entry() -> None:
    bad = SMALL.replace("GPU0\t X \tNV2\tSYS\t0-7", "GPU0\t X \tNV2\tSYS\t0-7\t3")
    with pytest.raises(TopoMatrixError) as caught:
        parse(bad)
    assert caught.value.line == 3 and caught.value.token == "3" and "ragged row GPU0" in str(caught.value)


def test_non_square_block_missing_a_row() -> None:
    bad = SMALL.replace("GPU2\tSYS\tSYS\t X \t8-15\n", "")
    with pytest.raises(TopoMatrixError, match=r"line 2: non-square GPU block.*no row for GPU2"):
        parse(bad)


def test_non_square_block_row_without_column() -> None:
    bad = SMALL + "GPU3\tSYS\tSYS\tSYS\t8-15\n"
    with pytest.raises(TopoMatrixError, match=r"line 6: non-square GPU block: row GPU3 has no column"):
        parse(bad)


def test_diagonal_must_be_self() -> None:
    bad = SMALL.replace("GPU2\tSYS\tSYS\t X ", "GPU2\tSYS\tSYS\tNV1")
    with pytest.raises(TopoMatrixError, match=r"line 5: the diagonal must be X.*'NV1'"):
        parse(bad)


def test_self_off_the_diagonal() -> None:
    bad = SMALL.replace("GPU0\t X \tNV2", "GPU0\t X \t X ")
    with pytest.raises(TopoMatrixError, match=r"line 3: X off the diagonal in row GPU0, column GPU1"):
        parse(bad)


def test_duplicate_row() -> None:
    bad = SMALL + "GPU1\tNV2\t X \tSYS\t0-7\n"
    with pytest.raises(TopoMatrixError, match=r"line 6: row GPU1 appears twice"):
        parse(bad)


def test_text_that_is_no_print() -> None:
    with pytest.raises(TopoMatrixError, match="no header line starting with GPU0"):
        parse("hello\nworld\n")


def test_stray_line_inside_the_matrix() -> None:
    bad = SMALL.replace("GPU2\tSYS", "oops here\nGPU2\tSYS")
    with pytest.raises(TopoMatrixError) as caught:
        parse(bad)
    assert caught.value.line == 5 and caught.value.token == "oops"


def test_unknown_header_column_after_affinity() -> None:
    bad = SMALL.replace("CPU Affinity", "CPU Affinity\tColour")
    with pytest.raises(TopoMatrixError, match=r"line 2: unknown header column.*'Colour'"):
        parse(bad)
