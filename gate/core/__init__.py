"""The foundation every stage stands on: user-facing errors and exit codes, files (atomic
writes, strict YAML/JSON loading), settings read once from the environment, progress lines,
git, and plain-text helpers. Imports nothing else of the gate."""

from gate.core.exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "errors": ["EXIT_BAD_INPUT", "EXIT_ERROR", "EXIT_FAIL", "EXIT_INCONCLUSIVE", "EXIT_INTERRUPTED", "EXIT_PASS", "EXIT_TERMINATED", "GateError", "MeasurementError"],
    "files": ["load_json_model", "load_yaml_mapping", "load_yaml_model", "write_atomic"],
    "git": ["merge_base", "resolve_ref", "run_git"],
    "progress": ["Progress"],
    "settings": ["Settings"],
    "text": ["one_line"],
})
