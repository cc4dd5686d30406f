from __future__ import annotations

import pytest

from bench.trace import TraceError, load_nodes, load_pods


def test_loads_nodes_and_pods(write_csv):
    nodes = load_nodes(
        write_csv("n.csv", "sn,cpu_milli,memory_mib,gpu,model", ["a,64000,262144,2,P100", "b,96000,393216,8,V100M32"])
    )
    pods = load_pods(
        write_csv(
            "p.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time",
            [
                "p0,12000,16384,1,1000,,LS,Running,0,12537496,0",
                "p1,6000,12288,1,460,V100M16|V100M32,BE,Running,5,,5",
                "p2,4000,1024,0,0,,BE,Running,,,",
            ],
        )
    )
    assert [(n.name, n.gpus, n.model) for n in nodes] == [("a", 2, "P100"), ("b", 8, "V100M32")]
    assert pods[0].gpu_milli_total == 1000 and pods[0].deletion_time == 12537496
    assert pods[1].gpu_spec == ("V100M16", "V100M32") and pods[1].deletion_time is None
    assert pods[2].num_gpu == 0 and pods[2].creation_time is None


def test_optional_pod_columns_may_be_absent(write_csv):
    # The multigpu20 list of the trace has only the five resource columns.
    pods = load_pods(write_csv("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", ["p0,8000,1024,8,1000"]))
    assert pods[0].num_gpu == 8 and pods[0].gpu_spec == () and pods[0].qos == ""


def test_missing_column_is_named(write_csv):
    path = write_csv("p.csv", "name,cpu_milli,memory_mib,num_gpu", ["p0,1,1,1"])
    with pytest.raises(TraceError, match=r"p\.csv row 1 \(header\): missing column\(s\) 'gpu_milli'"):
        load_pods(path)


def test_bad_integer_names_row_and_column(write_csv):
    path = write_csv("n.csv", "sn,cpu_milli,memory_mib,gpu,model", ["a,64000,262144,2,P100", "b,lots,393216,8,V100M32"])
    with pytest.raises(TraceError, match=r"n\.csv row 3 column 'cpu_milli': 'lots' is not an integer"):
        load_nodes(path)


def test_negative_value_is_rejected(write_csv):
    path = write_csv("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", ["p0,-5,1,1,1000"])
    with pytest.raises(TraceError, match=r"row 2 column 'cpu_milli': -5 is below 0"):
        load_pods(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p0,1,1,1,1500", r"'gpu_milli': 1500 exceeds one GPU"),
        ("p0,1,1,2,500", r"'gpu_milli': 500 with num_gpu 2 \(multi-GPU pods take whole GPUs\)"),
        ("p0,1,1,0,500", r"'gpu_milli': 500 with num_gpu 0"),
    ],
)
def test_inconsistent_gpu_request_is_rejected(write_csv, row, message):
    with pytest.raises(TraceError, match=message):
        load_pods(write_csv("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", [row]))


def test_short_row_is_rejected(write_csv):
    path = write_csv("n.csv", "sn,cpu_milli,memory_mib,gpu,model", ["a,64000,262144"])
    with pytest.raises(TraceError, match=r"n\.csv row 2: expected 5 columns"):
        load_nodes(path)


def test_gpu_node_without_model_is_rejected(write_csv):
    with pytest.raises(TraceError, match=r"row 2 column 'model': empty for a node with 4 GPUs"):
        load_nodes(write_csv("n.csv", "sn,cpu_milli,memory_mib,gpu,model", ["a,1,1,4,"]))


def test_empty_and_missing_files(write_csv, tmp_path):
    with pytest.raises(TraceError, match="no pod rows"):
        load_pods(write_csv("p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", []))
    with pytest.raises(TraceError, match="no such file"):
        load_nodes(tmp_path / "absent.csv")
