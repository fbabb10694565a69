"""gate.runner.gpus.read_gpus against a nvidia-smi stand-in that prints recorded CSV: the one
reader the fingerprint and the doctor share, an older driver's field name, and a failure."""

from __future__ import annotations

import subprocess

import pytest
from support.trees import write

from gate.runner.fingerprint import Fingerprint
from gate.runner.gpus import gpus_or_none, read_gpus

ROW = "0, GPU-3f2a, NVIDIA A100-SXM4-80GB, 535.104.05, Enabled, 1410, 1410, 0x0, 123, 81920\n"


def smi(tmp_path, script: str) -> str:
    path = write(tmp_path, "nvidia-smi", "#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_an_older_driver_knows_the_throttle_reasons_by_their_old_name(tmp_path):
    fake = smi(tmp_path, 'case "$1" in\n'
                         '  *clocks_event_reasons*) echo "Field is not valid" >&2; exit 2 ;;\n'
                         f'  --query-gpu=*) printf "{ROW}" ;;\n'
                         '  --query-compute-apps=*) printf "GPU-3f2a, 4242, python, 70000\\n" ;;\n'
                         "esac\n")
    reading = read_gpus(fake)
    (gpu,) = reading.gpus
    assert (gpu.name, gpu.driver, gpu.memory_total_mib, gpu.throttle_reasons) == \
        ("NVIDIA A100-SXM4-80GB", "535.104.05", 81920, 0)
    assert [p.pid for p in reading.processes] == [4242]
    assert Fingerprint(gpus=gpus_or_none(fake)).hardware_key == "1x NVIDIA A100-SXM4-80GB"


def test_a_failing_nvidia_smi_is_an_error_for_the_doctor_and_no_gpu_for_the_fingerprint(
        tmp_path):
    fake = smi(tmp_path, 'echo "NVIDIA-SMI has failed because it could not communicate" >&2\n'
                         "exit 9\n")
    with pytest.raises((OSError, subprocess.SubprocessError)):
        read_gpus(fake)
    assert gpus_or_none(fake) == []
