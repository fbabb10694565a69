"""The machine and the build: the runner doctor and the facts it reads from /proc, cgroups
and nvidia-smi, the environment fingerprint, installing a vLLM build (or one commit's build
as an overlay over an installed one), and the tiny random-weight model the CPU path serves."""

from gate.runner.doctor import DoctorReport, Finding, Severity
from gate.runner.fingerprint import Fingerprint, warnings_for

__all__ = ["DoctorReport", "Finding", "Severity", "Fingerprint", "warnings_for"]
