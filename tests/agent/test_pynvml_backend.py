"""The real PynvmlBackend over a pynvml stand-in that raises pynvml's own errors."""

from __future__ import annotations

import pynvml
import pytest

from agent.nvml import NvmlUnavailable, normalize_bus_id
from agent.nvml.pynvml_backend import PynvmlBackend
from tests.fakes.nvml import FakeGpu, FakePynvml

SWITCH = "00000008:00:00.0"


def h100(i: int, **kw: object) -> FakeGpu:
    links = dict.fromkeys(range(18), (1, SWITCH, 2))
    return FakeGpu(
        uuid=f"GPU-{i}",
        name="NVIDIA H100 80GB HBM3",
        bus_id=f"00000000:{0x19 + i:02X}:00.0",
        links=links,
        **kw,
    )  # type: ignore[arg-type]


def test_inventory_reads_links_up_to_the_driver_count_not_max_links() -> None:
    # Indices 18..35 raise InvalidArgument (GB200 behaviour): "no link", not an error.
    lib = FakePynvml([h100(0)])
    inv = PynvmlBackend(lib).inventory()
    gpu = inv.gpus[0]
    assert len(gpu.links) == 18
    assert all(link.active and link.remote_type == "NVSwitch" for link in gpu.links)
    assert gpu.errors == ()
    assert not lib.initialized, "nvmlShutdown must be called"


def test_pcie_gpu_without_nvlink_has_no_links_and_no_errors() -> None:
    gpu = FakeGpu(
        uuid="GPU-x", name="NVIDIA L4", bus_id="00000000:3B:00.0", nvlink_supported=False, mig=None
    )
    inv = PynvmlBackend(FakePynvml([gpu])).inventory()
    assert inv.gpus[0].links == ()
    assert inv.gpus[0].mig_mode is None
    assert inv.gpus[0].errors == ()


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (pynvml.NVMLError_LibraryNotFound, "LibraryNotFound"),
        (pynvml.NVMLError_DriverNotLoaded, "DriverNotLoaded"),
        (pynvml.NVMLError_NoPermission, "NoPermission"),
    ],
    ids=["library-missing", "driver-not-loaded", "no-permission"],
)
def test_init_failure_becomes_nvml_unavailable(error: type[pynvml.NVMLError], reason: str) -> None:
    with pytest.raises(NvmlUnavailable) as info:
        PynvmlBackend(FakePynvml([h100(0)], init_error=error)).inventory()
    assert info.value.reason == reason


def test_unexpected_field_error_is_recorded_not_raised() -> None:
    gpu = h100(0, fail={"memory": pynvml.NVMLError_Unknown})
    inv = PynvmlBackend(FakePynvml([gpu])).inventory()
    assert inv.gpus[0].memory_total_bytes is None
    assert any("memory" in e for e in inv.gpus[0].errors)


def test_gpu_lost_mid_query_becomes_unavailable() -> None:
    gpu = h100(0, fail={"uuid": pynvml.NVMLError_GpuIsLost})
    with pytest.raises(NvmlUnavailable) as info:
        PynvmlBackend(FakePynvml([gpu])).inventory()
    assert info.value.reason == "GpuIsLost"


@pytest.mark.parametrize(
    ("nvml", "sysfs"),
    [
        ("00000000:1A:00.0", "0000:1a:00.0"),
        ("0000:1A:00.0", "0000:1a:00.0"),
        ("00010000:01:00.0", "10000:01:00.0"),
        ("00000001:00:00.0", "0001:00:00.0"),
    ],
)
def test_normalize_bus_id(nvml: str, sysfs: str) -> None:
    assert normalize_bus_id(nvml) == sysfs
