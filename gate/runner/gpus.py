"""The one nvidia-smi reader: the GPUs and their compute processes, as one model that the
fingerprint (what a run was measured on) and the doctor (is the GPU fit to measure on) share.

Both queries use `--format=csv,noheader,nounits`; the parsers take that text, so tests run them
on recorded output. nvidia-smi reports the PIDs of the PID namespace the driver sees, the
host's: inside a container they are not the PIDs /proc shows (gate.runner.doctor matches
processes by other means there, docs/action.md#checking-the-runner-gate-doctor).
"""

from __future__ import annotations

import contextlib
import csv
import io
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

# The order of the fields in `--query-gpu`; the parser reads them in this order.
GPU_FIELDS = ("index", "uuid", "name", "driver_version", "persistence_mode", "clocks.sm",
              "clocks.max.sm", "clocks_event_reasons.active", "memory.used", "memory.total")
# Drivers before 535 know the reasons mask only by its old name.
GPU_FIELDS_OLD = tuple(f.replace("clocks_event_reasons", "clocks_throttle_reasons")
                       for f in GPU_FIELDS)
APP_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
SMI_TIMEOUT_S = 30


class Gpu(BaseModel):
    """One GPU as nvidia-smi reports it. Only `name` is certain; a field nvidia-smi answers
    with [N/A] or [Not Supported] is None."""

    model_config = ConfigDict(extra="forbid")

    name: str
    index: int | None = None
    uuid: str | None = None
    driver: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    persistence_mode: str | None = None  # "Enabled", "Disabled"
    sm_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    throttle_reasons: int | None = None  # the clocks_event_reasons bit mask

    @model_validator(mode="before")
    @classmethod
    def _older_results(cls, data: Any) -> Any:
        # results.json written before the readers were merged name the total `memory_mib`
        if isinstance(data, dict) and "memory_mib" in data:
            data = {**data, "memory_total_mib": data["memory_mib"]}
            data.pop("memory_mib")
        return data


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU; `pid` is in the host's PID namespace."""

    gpu_uuid: str
    pid: int
    name: str
    used_memory_mib: int | None


@dataclass(frozen=True)
class GpuReading:
    gpus: list[Gpu]
    processes: list[GpuProcess]


def _int(text: str) -> int | None:
    text = text.strip()
    try:
        return int(text, 16) if text.startswith("0x") else int(float(text))
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def _text(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") else text


def _rows(csv_text: str, width: int) -> list[list[str]]:
    rows = csv.reader(io.StringIO(csv_text.strip()), skipinitialspace=True)
    return [[c.strip() for c in row] for row in rows if len(row) == width]


def parse_gpus(csv_text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=<GPU_FIELDS> --format=csv,noheader,nounits`."""
    gpus = []
    for p in _rows(csv_text, len(GPU_FIELDS)):
        if not p[2]:
            continue
        gpus.append(Gpu(
            index=_int(p[0]), uuid=_text(p[1]), name=p[2], driver=_text(p[3]),
            persistence_mode=_text(p[4]), sm_clock_mhz=_int(p[5]), sm_clock_max_mhz=_int(p[6]),
            throttle_reasons=_int(p[7]), memory_used_mib=_int(p[8]), memory_total_mib=_int(p[9]),
        ))
    return gpus


def parse_gpu_processes(csv_text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=<APP_FIELDS> --format=csv,noheader,nounits`."""
    apps = []
    for p in _rows(csv_text, len(APP_FIELDS)):
        if (pid := _int(p[1])) is not None:
            apps.append(GpuProcess(p[0], pid, p[2], _int(p[3])))
    return apps


def _smi(smi: str, query: str) -> str:
    return subprocess.run([smi, query, "--format=csv,noheader,nounits"], capture_output=True,
                          text=True, timeout=SMI_TIMEOUT_S, check=True).stdout


def read_gpus(smi: str | None = None) -> GpuReading | None:
    """The GPUs and their compute processes; None when there is no nvidia-smi. A nvidia-smi
    that fails raises OSError or subprocess.SubprocessError (the caller says so)."""
    smi = smi or shutil.which("nvidia-smi")
    if not smi:
        return None
    gpus_csv = None
    for fields in (GPU_FIELDS, GPU_FIELDS_OLD):
        with contextlib.suppress(subprocess.CalledProcessError):
            gpus_csv = _smi(smi, f"--query-gpu={','.join(fields)}")
            break
    if gpus_csv is None:
        raise OSError("nvidia-smi --query-gpu failed with both names of the clock reasons")
    apps_csv = _smi(smi, f"--query-compute-apps={','.join(APP_FIELDS)}")
    return GpuReading(parse_gpus(gpus_csv), parse_gpu_processes(apps_csv))


def gpus_or_none(smi: str | None = None) -> list[Gpu]:
    """The GPUs for a fingerprint: an empty list when there is no nvidia-smi or it fails."""
    try:
        reading = read_gpus(smi)
    except (OSError, subprocess.SubprocessError):
        return []
    return reading.gpus if reading else []
