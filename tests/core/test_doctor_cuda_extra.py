"""`spu doctor` tells which GPU extra a machine needs: `gpu-cu13` for a driver that runs CUDA 13 (>= 580),
`gpu` for CUDA 12 (>= 525), and warns when CUDA 13 wheels sit on a CUDA 12 driver."""

from __future__ import annotations

import pytest

from tools_server.commands.doctor import cuda_extra_for_driver, gpu_check, run_doctor

H200 = {"name": "NVIDIA H200", "memory": "143771 MiB", "driver": "580.95.05"}
A100_OLD_DRIVER = {"name": "NVIDIA A100-SXM4-80GB", "memory": "81920 MiB", "driver": "535.183.01"}


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        ("580.95.05", ("gpu-cu13", "CUDA 13")),
        ("590.10", ("gpu-cu13", "CUDA 13")),
        ("575.57.08", ("gpu", "CUDA 12")),
        ("525.60.13", ("gpu", "CUDA 12")),
        ("470.256.02", None),
        ("unknown", None),
    ],
)
def test_driver_to_extra(driver, expected):
    assert cuda_extra_for_driver(driver) == expected


def test_gpu_check_names_the_extra():
    ok = gpu_check([H200], installed={})
    assert ok.status == "ok" and ok.facts["cuda_extra"] == "gpu-cu13"
    assert "spu-scaffold[gpu-cu13]" in ok.detail
    older = gpu_check([A100_OLD_DRIVER], installed={"gpu": ["cupy-cuda12x"]})
    assert older.status == "ok" and older.facts["cuda_extra"] == "gpu" and "[gpu]" in older.detail


def test_cuda13_wheels_on_a_cuda12_driver_warn_with_the_fix():
    res = gpu_check([A100_OLD_DRIVER], installed={"gpu-cu13": ["cupy-cuda13x", "gpu4pyscf-cuda13x"]})
    assert res.status == "warn"
    assert res.fix == "pip uninstall cupy-cuda13x gpu4pyscf-cuda13x && pip install 'spu-scaffold[gpu]'"


def test_too_old_driver_warns():
    res = gpu_check([{"name": "Tesla K80", "memory": "11441 MiB", "driver": "470.256.02"}], installed={})
    assert res.status == "warn" and "525" in res.fix


def test_doctor_report_carries_the_extra(tmp_path, monkeypatch):
    monkeypatch.setenv("SPU_WORKDIR", str(tmp_path / "w"))
    monkeypatch.setenv("SPU_CACHE_DIR", str(tmp_path / "c"))
    report = run_doctor(only=["gpu"], gpus=[H200])
    (gpu,) = [c for c in report["checks"] if c["name"] == "gpu"]
    assert gpu["facts"]["cuda_extra"] == "gpu-cu13"
