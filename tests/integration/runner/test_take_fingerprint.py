"""gate.runner.fingerprint.collect on this host: the cgroup quota read from a fixture tree, and the
probe of the server's interpreter as a real subprocess (this interpreter, with torch)."""

import sys

from support.trees import write

from gate.runner.fingerprint import take_fingerprint


def test_collect_uses_cgroup_root_and_env(tmp_path):
    write(tmp_path, "cpu.max", "50000 100000\n")
    fp = take_fingerprint(env={"OMP_NUM_THREADS": "3"}, cgroup_root=tmp_path, probe=False)
    assert fp.cpu_quota.quota_cpus == 0.5
    assert fp.effective_cpus == 0.5
    assert fp.omp_num_threads == "3"
    assert fp.versions["python"].startswith(f"{sys.version_info.major}.")


def test_probe_reads_torch_threads_as_the_server_sees_them():
    # OMP_NUM_THREADS reaches the probed interpreter (torch caps it at the core count).
    fp = take_fingerprint(python=sys.executable, env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert fp.torch_threads == 1 and fp.omp_num_threads == "1"
    assert fp.versions.get("torch")


def test_probe_of_a_missing_interpreter_is_reported_not_raised():
    fp = take_fingerprint(python="/nonexistent/python", env={})
    assert fp.probe_error and "could not run" in fp.probe_error


def test_unset_pin_is_vllms_choice_not_v1():
    fp = take_fingerprint(env={}, probe=False)
    assert (fp.model_runner, fp.model_runner_pinned, fp.model_runner_source) == (None, None, None)
    pinned = take_fingerprint(env={"VLLM_USE_V2_MODEL_RUNNER": "1"}, probe=False)
    assert (pinned.model_runner, pinned.model_runner_source) == ("v2", "environment")
