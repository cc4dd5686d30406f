"""The binder keeps a small struct per pod, not its annotations (issue 15, #7).

2,000 pods with 250 KB of annotations each, decoded one by one and kept by ClusterView,
retained 526 MiB (tracemalloc) when the view kept every pod's annotations, and 2 MiB
since. `cd tests/binder && PYTHONPATH=../..:.. python test_binder_pod_size.py 2000`
measures it again.
"""

from __future__ import annotations

import sys
import tracemalloc

import msgspec
from decision_keys import TEST_KEY

from schemas import annotations as pod_annotations
from schemas.events import DeviceAssignment
from schemas.seal import SEAL
from services.binder.cluster_view import ClusterView
from services.binder.kube_objects import PodObject
from services.binder.outcome import PodView

ANNOTATION_BYTES = 250_000
_decoder = msgspec.json.Decoder(PodObject)


def pod_bytes(number: int) -> bytes:
    """A bound pod as the API server sends it: sealed devices, and 250 KB of a tenant's annotations."""
    uid = f"uid-{number}"
    devices = (DeviceAssignment(index=number % 8),)
    annotations = {f"example.com/note-{i}": "x" * 1_000 for i in range(ANNOTATION_BYTES // 1_000)}
    annotations[pod_annotations.DEVICES] = pod_annotations.encode_devices(devices)
    annotations[SEAL] = TEST_KEY.seal(uid, "gpu-1", f"d-{number}", devices)
    body = {
        "metadata": {"name": f"p-{number}", "namespace": "ns", "uid": uid, "annotations": annotations},
        "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Running"},
    }
    return msgspec.json.encode(body)


def retained_bytes(pods: int) -> int:
    """What the binder's view keeps of `pods` such pods, decoded one by one from the API's bytes."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        view = ClusterView(decision_key=TEST_KEY)
        for number in range(pods):
            view.apply_pod("ADDED", _decoder.decode(pod_bytes(number)))
        retained = tracemalloc.get_traced_memory()[0] - before
        assert view.pod(f"uid-{pods - 1}") is not None
        return retained
    finally:
        tracemalloc.stop()


def test_a_pod_with_250_kb_of_annotations_leaves_a_small_view() -> None:
    view = _decoder.decode(pod_bytes(3)).view(TEST_KEY)
    assert view.devices == (DeviceAssignment(index=3),)
    assert not any(
        isinstance(getattr(view, field), dict) and len(getattr(view, field)) > 8 for field in PodView.__struct_fields__
    )
    assert len(msgspec.json.encode(view)) < 1_024


def test_two_hundred_such_pods_keep_well_under_a_megabyte_each() -> None:
    """The annotations alone are 50 MB; the views of the pods must keep a small part of it."""
    assert retained_bytes(200) < 2_000_000


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2_000
    print(
        f"{count} pods with {ANNOTATION_BYTES} bytes of annotations: {retained_bytes(count) / 2**20:.2f} MiB retained"
    )
