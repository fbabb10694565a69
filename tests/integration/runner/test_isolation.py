"""`gate trust check-runner` and gate/runner/isolation.py on real files, real modes and owners,
real sockets, real processes (issue 16, item 4; security review M2). The job's user is a
parameter of the checks (JobUser): the tests run as whoever runs them, so "the provisioning"
is this process's uid and "the job" is another uid, or the other way round for the attacks (a
marker the job's user wrote). The process table is read from the real /proc where a test
needs a real process, and built by hand where it needs a runner's process tree."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from gate.cli import main
from gate.core.errors import GateError
from gate.runner import isolation
from gate.runner.isolation import JobUser, MarkerCheck, Process

ME = os.getuid()
OTHER = ME + 4242  # a uid that owns nothing here
BOOT = "3b1c1f4e-0000-4000-8000-00000000beef"


def job_user(tmp_path: Path, uid: int = OTHER) -> JobUser:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return JobUser(uid, frozenset({uid}), home)


def provisioned(tmp_path: Path, **fields) -> Path:
    folder = tmp_path / "etc-perf-gate"
    folder.mkdir(mode=0o755, exist_ok=True)
    marker = folder / "fresh-runner.json"
    body = {"boot_id": BOOT, "runner_name": "gpu-a100-7f3a", "ephemeral": True, **fields}
    marker.write_text(json.dumps(body))
    marker.chmod(0o444)
    return marker


def check(marker: Path, owner: int = ME, runner: str | None = "gpu-a100-7f3a") -> MarkerCheck:
    return MarkerCheck(marker, BOOT, runner, owner)


# -- the marker ---------------------------------------------------------------------------
def test_a_marker_of_this_boot_and_runner_from_the_provisioning_passes(tmp_path):
    assert isolation.marker_problems(check(provisioned(tmp_path)), job_user(tmp_path)) == []


def test_a_marker_the_jobs_user_could_have_written_is_refused(tmp_path):
    """The attack: an earlier job on a reused runner wrote a marker for the next one."""
    marker = provisioned(tmp_path)
    if ME == 0:  # root can make it literally the job user's file
        os.chown(marker, OTHER, OTHER)
    writer = marker.stat().st_uid
    problems = isolation.marker_problems(check(marker, owner=OTHER + 1), job_user(tmp_path))
    assert any(f"owned by uid {writer}, not {OTHER + 1}" in p for p in problems), problems


@pytest.mark.parametrize("uid", [0, ME], ids=["root", "the-marker-owner"])
def test_a_job_that_could_write_the_marker_itself_is_refused(tmp_path, uid):
    problems = isolation.marker_problems(check(provisioned(tmp_path)), job_user(tmp_path, uid))
    assert problems and f"runs as uid {uid}" in problems[0]


@pytest.mark.parametrize("target", ["marker", "folder"])
def test_a_marker_others_may_rewrite_is_refused(tmp_path, target):
    marker = provisioned(tmp_path)
    (marker if target == "marker" else marker.parent).chmod(0o777 if target == "folder" else 0o666)
    problems = isolation.marker_problems(check(marker), job_user(tmp_path))
    assert any("writable by group or others" in p for p in problems)


def test_a_symlinked_marker_is_refused(tmp_path):
    real = provisioned(tmp_path)
    link = real.parent / "link.json"
    link.symlink_to(real)
    assert any("is a symlink" in p for p in
               isolation.marker_problems(check(link), job_user(tmp_path)))


@pytest.mark.parametrize(
    ("fields", "runner", "message"),
    [
        ({"boot_id": "an-older-boot"}, "gpu-a100-7f3a", "from another boot"),
        ({"runner_name": "gpu-a100-0001"}, "gpu-a100-7f3a", "names runner 'gpu-a100-0001'"),
        ({}, None, "RUNNER_NAME is not set"),
        ({"ephemeral": False}, "gpu-a100-7f3a", "cannot be used"),
    ],
    ids=["another-boot", "another-runner", "no-runner-name", "not-ephemeral"],
)
def test_a_marker_for_another_boot_or_runner_is_refused(tmp_path, fields, runner, message):
    marker = provisioned(tmp_path, **fields)
    problems = isolation.marker_problems(check(marker, runner=runner), job_user(tmp_path))
    assert any(message in p for p in problems), problems


def test_no_marker_is_refused(tmp_path):
    problems = isolation.marker_problems(check(tmp_path / "nope.json"), job_user(tmp_path))
    assert problems and "no runner marker" in problems[0]


# -- the model cache ----------------------------------------------------------------------
def model_cache(tmp_path: Path) -> Path:
    hub = tmp_path / "hub"
    snap = hub / "models--google--gemma" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (hub / "models--google--gemma" / "blobs").mkdir()
    blob = hub / "models--google--gemma" / "blobs" / "cfg"
    blob.write_text("{}")
    (snap / "config.json").symlink_to(blob)
    for path in [hub, *hub.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return hub


def test_a_model_cache_the_job_cannot_write_passes(tmp_path):
    assert isolation.model_cache_problems(model_cache(tmp_path), job_user(tmp_path)) == []


def test_a_model_file_the_job_may_write_is_refused(tmp_path):
    """The attack: a job rewrites a model's config (e.g. to load remote code) for later jobs."""
    hub = model_cache(tmp_path)
    blob = hub / "models--google--gemma" / "blobs" / "cfg"
    blob.chmod(0o666)
    (problem,) = isolation.model_cache_problems(hub, job_user(tmp_path))
    assert "writable by this job" in problem and str(blob) in problem


def test_a_model_cache_owned_by_the_job_is_refused(tmp_path):
    hub = model_cache(tmp_path)
    (problem,) = isolation.model_cache_problems(hub, job_user(tmp_path, uid=ME))
    assert f"owner uid {ME}" in problem


def test_a_link_out_of_the_model_cache_is_refused(tmp_path):
    """L6: a snapshot file that links to a file the job may write is that file."""
    hub = model_cache(tmp_path)
    outside = tmp_path / "writable-config.json"
    outside.write_text("{}")
    (hub / "models--google--gemma" / "snapshots" / "abc" / "extra.json").symlink_to(outside)
    (problem,) = isolation.model_cache_problems(hub, job_user(tmp_path))
    assert f"links to {outside}, outside it" in problem


def test_a_writable_mount_inside_a_read_only_cache_is_refused(tmp_path):
    """L6: one statvfs of the top folder sees the read-only mount, not a read-write bind
    mount nested inside it (/proc/self/mountinfo does)."""
    hub = model_cache(tmp_path)
    inner = hub / "models--google--gemma"
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        f"36 25 0:32 / {hub} ro,relatime shared:1 - ext4 /dev/sdb ro\n"
        f"37 36 0:33 / {str(inner).replace(' ', chr(92) + '040')} rw,relatime - ext4 /dev/sdc rw\n"
        "38 25 0:34 / /elsewhere rw,relatime - tmpfs tmpfs rw\n")
    (problem,) = isolation.model_cache_problems(hub, job_user(tmp_path), mountinfo)
    assert problem.startswith(f"a writable mount {inner} is inside the model cache")


def test_a_missing_model_cache_is_refused(tmp_path):
    (problem,) = isolation.model_cache_problems(tmp_path / "none", job_user(tmp_path))
    assert "is not a folder" in problem


# -- caches from before, instance metadata, the job's caches ------------------------------
def test_a_compile_cache_left_from_before_is_refused(tmp_path):
    user = job_user(tmp_path)
    inductor = user.home / ".cache" / "vllm" / "torch_compile_cache"
    inductor.mkdir(parents=True)
    assert isolation.stale_cache_problems(isolation.default_cache_dirs(user)) == []  # empty
    (inductor / "graph.py").write_text("import os  # runs in the next job\n")
    (problem,) = isolation.stale_cache_problems(isolation.default_cache_dirs(user))
    assert str(user.home / ".cache" / "vllm") in problem


@pytest.mark.parametrize("where", [".cache/gate/noise", ".cache/pip/http"])
def test_a_gate_or_pip_cache_left_from_before_is_refused(tmp_path, where):
    """Security review M3: a calibration planted in ~/.cache/gate/noise would be read by the
    next job's A/B; pip's cache would hand the next install a file of someone's choosing."""
    user = job_user(tmp_path)
    (user.home / where).mkdir(parents=True)
    (user.home / where / "a100--x.yaml").write_text("runs: []\n")
    (problem,) = isolation.stale_cache_problems(isolation.default_cache_dirs(user))
    assert str(user.home / where.split("/")[0] / where.split("/")[1]) in problem


def test_an_answering_metadata_service_is_refused():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        (problem,) = isolation.metadata_problems([f"127.0.0.1:{port}"])
    assert "answers: block it" in problem
    assert isolation.metadata_problems([f"127.0.0.1:{port}"]) == []  # closed now: blocked


def test_the_job_caches_are_new_folders_of_this_job(tmp_path):
    caches = isolation.prepare_job_caches(tmp_path / "caches", tmp_path / "hub")
    assert caches.env["HF_HUB_OFFLINE"] == "1" and caches.env["HF_HUB_CACHE"] == str(
        tmp_path / "hub")
    for var in ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                "GATE_CACHE_DIR"):  # the gate's calibrations and models: the job's own too
        assert Path(caches.env[var]).is_dir()
        assert Path(caches.env[var]).parent == tmp_path / "caches"
    with pytest.raises(GateError, match="exists already") as err:
        isolation.prepare_job_caches(tmp_path / "caches", tmp_path / "hub")
    assert err.value.exit_code == 1


# -- the command --------------------------------------------------------------------------
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runner_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "runner-temp").mkdir(exist_ok=True)
    env_file = tmp_path / "github_env"
    env_file.write_text("")
    return {"RUNNER_NAME": "gpu-a100-7f3a", "RUNNER_TEMP": str(tmp_path / "runner-temp"),
            "GITHUB_ENV": str(env_file)}


def test_check_runner_points_the_caches_at_the_job_when_all_checks_pass(tmp_path, monkeypatch):
    """The whole command in-process; who the job runs as, and the runner's process tree, are
    what the test sets (the test does not run as a runner's job)."""
    marker, hub = provisioned(tmp_path), model_cache(tmp_path)
    monkeypatch.setattr(isolation, "BOOT_ID", tmp_path / "boot_id")
    (tmp_path / "boot_id").write_text(BOOT + "\n")
    monkeypatch.setattr(JobUser, "current", classmethod(lambda cls: job_user(tmp_path)))
    worker_logs(tmp_path, 1)
    tree = runner_tree(tmp_path, os.getpid())
    monkeypatch.setattr(isolation, "process_table", lambda proc=isolation.PROC: tree)
    for key in [k for k in os.environ if k in isolation.STEERING_VARS or k.startswith("PIP_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    for key, value in runner_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    code = main(["trust", "check-runner", "--marker", str(marker), "--marker-owner", str(ME),
                 "--model-cache", str(hub), "--metadata", f"127.0.0.1:{closed_port()}"])
    assert code == 0
    exported = (tmp_path / "github_env").read_text()
    assert "HF_HUB_CACHE<<" in exported and str(hub) in exported
    assert str(tmp_path / "runner-temp" / "perf-gate-caches" / "torchinductor") in exported
    assert "HF_HUB_OFFLINE<<" in exported
    assert str(tmp_path / "runner-temp" / "perf-gate-caches" / "gate") in exported


def test_check_runner_refuses_as_a_real_subprocess_and_exports_nothing(tmp_path):
    """Run as whoever runs the tests: root could have written any marker, anyone else did not
    write a root-owned one here; either way: exit 1, reasons, no caches, nothing exported."""
    marker = provisioned(tmp_path)
    env = {**os.environ, **runner_env(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", "trust", "check-runner", "--marker", str(marker),
         "--model-cache", str(model_cache(tmp_path)), "--metadata", f"127.0.0.1:{closed_port()}"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gate trust: refused:" in proc.stderr and "Traceback" not in proc.stderr
    expected = f"runs as uid {ME}" if ME == 0 else f"owned by uid {ME}, not 0"
    assert expected in proc.stderr
    assert "no Runner.Worker process above this one" in proc.stderr
    assert (tmp_path / "github_env").read_text() == ""
    assert not (tmp_path / "runner-temp" / "perf-gate-caches").exists()


# -- what an earlier job could have left: processes, configuration, PATH, the runner's log --
WORKER_EXE = "actions-runner/bin/Runner.Worker"


def runner_tree(tmp_path: Path, me: int, *extra: Process) -> dict[int, Process]:
    """A runner's processes as /proc shows them: the listener, this job's worker and its
    step (bash) running `me`; the worker's executable in a runner folder under tmp_path."""
    exe = str(tmp_path / WORKER_EXE)
    table = [Process(1, 0, 0, "systemd"), Process(10, 1, OTHER, "Runner.Listener"),
             Process(20, 10, OTHER, "Runner.Worker", exe), Process(30, 20, OTHER, "bash"),
             Process(me, 30, OTHER, "python3"), *extra]
    return {p.pid: p for p in table}


def test_only_the_jobs_own_processes_pass():
    table = runner_tree(Path("/r"), 40, Process(41, 40, OTHER, "node"),  # this job's child
                        Process(50, 1, 0, "sshd"))  # root's: not the job user's
    assert isolation.leftover_problems(table, 40, OTHER) == []


def test_a_process_an_earlier_job_left_is_refused():
    """The attack: a daemon (reparented to init) that rewrites what the next job runs."""
    table = runner_tree(Path("/r"), 40, Process(77, 1, OTHER, "::error::x"))
    (problem,) = isolation.leftover_problems(table, 40, OTHER)
    assert problem.startswith("process 77 ('::error::x') of the job's user runs outside")


def test_outside_a_runner_the_processes_cannot_be_told_apart():
    table = {p.pid: p for p in [Process(1, 0, 0, "init"), Process(5, 1, OTHER, "bash")]}
    (problem,) = isolation.leftover_problems(table, 5, OTHER)
    assert "no Runner.Worker process above this one" in problem


def test_the_process_table_reads_a_real_detached_process(tmp_path):
    """A process started in its own session, as a daemon is: /proc names it, its parent and
    its user as the check needs them."""
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        table = isolation.process_table()
        found = table[proc.pid]
        assert (found.name, found.uid, found.ppid) == ("sleep", ME, os.getpid())
        assert found.exe and found.exe.endswith("sleep")
        me = table[os.getpid()]
        assert me.uid == ME and me.pid in {p.pid for p in isolation.ancestors(table, proc.pid)}
    finally:
        proc.kill()
        proc.wait()


def worker_logs(tmp_path: Path, count: int) -> Process:
    diag = tmp_path / "actions-runner" / "_diag"
    diag.mkdir(parents=True)
    for i in range(count):
        (diag / f"Worker_20261203-10{i:02d}00-utc.log").write_text("job\n")
    (diag / "Runner_20261203-095900-utc.log").write_text("listener\n")
    return Process(20, 10, OTHER, "Runner.Worker", str(tmp_path / WORKER_EXE))


def test_a_runner_that_ran_this_job_only_passes(tmp_path):
    assert isolation.runner_log_problems(worker_logs(tmp_path, 1)) == []


def test_a_runner_registration_reused_on_the_same_boot_is_refused(tmp_path):
    """The marker names this boot and this runner, which a run.sh loop re-registering under
    the same name keeps: the runner's own log folder shows the jobs before this one."""
    (problem,) = isolation.runner_log_problems(worker_logs(tmp_path, 2))
    assert "holds 2 job logs (Worker_*.log), not this job's alone" in problem
    assert isolation.runner_log_problems(None)[0].startswith("cannot find the runner's folder")


@pytest.mark.parametrize("left", [".gitconfig", ".config/git/config", ".config/pip/pip.conf",
                                  ".pip/pip.conf", ".netrc"])
def test_configuration_a_later_git_or_pip_would_obey_is_refused(tmp_path, left):
    """e.g. core.fsmonitor or url.<x>.insteadOf in ~/.gitconfig run or redirect the next
    job's git; index-url in pip.conf hands the next install a package of someone's choosing."""
    user = job_user(tmp_path)
    assert isolation.config_problems(user, {}) == []
    (user.home / left).parent.mkdir(parents=True, exist_ok=True)
    (user.home / left).write_text("[core]\n\tfsmonitor = /tmp/x\n")
    problems = isolation.config_problems(user, {})
    assert problems and str(user.home / left.split("/")[0]) in problems[0]


@pytest.mark.parametrize("name", ["LD_PRELOAD", "BASH_ENV", "PYTHONPATH", "PIP_INDEX_URL",
                                  "GIT_CONFIG_GLOBAL"])
def test_a_variable_that_steers_later_programs_is_refused(tmp_path, name):
    (problem,) = isolation.config_problems(job_user(tmp_path), {name: "/tmp/x", "HOME": "/h"})
    assert problem.startswith(f"{name} is set in the job's environment")


def test_a_writable_folder_on_path_with_files_is_refused(tmp_path):
    """~/.local/bin/python3 would run instead of the system's for every later step."""
    user = job_user(tmp_path)
    local = user.home / ".local" / "bin"
    local.mkdir(parents=True)
    system = tmp_path / "usr-bin"
    system.mkdir()
    (system / "python3").write_text("")
    system.chmod(0o755)
    path = f"{local}:{system}:{tmp_path / 'absent'}"
    assert isolation.path_problems(user, path) == []  # empty, and someone else's
    (local / "python3").write_text("#!/bin/sh\n")
    (problem,) = isolation.path_problems(user, path)
    assert problem.startswith(f"{local} is on PATH, writable by the job's user")
