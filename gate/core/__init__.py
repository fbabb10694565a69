"""The foundation every stage stands on: user-facing errors and exit codes, files (atomic
writes, strict YAML/JSON loading), settings read once from the environment, progress lines,
git, and plain-text helpers. Imports nothing else of the gate."""

from gate.core.errors import (
    EXIT_BAD_INPUT,
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_PASS,
    EXIT_TERMINATED,
    GateError,
    MeasurementError,
)
from gate.core.files import load_json_model, load_yaml_mapping, load_yaml_model, write_atomic
from gate.core.git import merge_base, resolve_ref, run_git
from gate.core.progress import Progress
from gate.core.settings import Settings
from gate.core.text import one_line

__all__ = ["EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_FAIL", "EXIT_INCONCLUSIVE", "EXIT_INTERRUPTED", "EXIT_PASS", "EXIT_TERMINATED", "GateError", "MeasurementError", "load_json_model", "load_yaml_mapping", "load_yaml_model", "write_atomic", "merge_base", "resolve_ref", "run_git", "Progress", "Settings", "one_line"]
