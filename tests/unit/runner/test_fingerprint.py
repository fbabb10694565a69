"""gate.runner.fingerprint's pure parts: the cgroup quota read from fixture trees, nvidia-smi output,
the oversubscription warning and the vLLM commit in a version string."""

import pytest
from support.trees import write

from gate.runner.fingerprint import (
    CpuQuota,
    Fingerprint,
    parse_nvidia_smi,
    read_cpu_quota,
    vllm_commit_from_version,
    warnings_for,
)


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


def test_nvidia_smi_parsing_and_hardware_key():
    gpus = parse_nvidia_smi("NVIDIA A100-SXM4-80GB, 81920, 550.54.15\nNVIDIA A100-SXM4-80GB, 81920, 550.54.15\n")
    assert len(gpus) == 2 and gpus[0].memory_mib == 81920
    assert Fingerprint(gpus=gpus).hardware_key == "2x NVIDIA A100-SXM4-80GB"
    assert Fingerprint(cpu_model="AMD EPYC").hardware_key == "cpu: AMD EPYC"


def test_vllm_commit_from_version():
    assert vllm_commit_from_version("0.11.1.dev12+g1234abcd.cpu") == "1234abcd"
    assert vllm_commit_from_version("0.32.0") is None
