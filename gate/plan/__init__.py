"""What to measure: the plan (server, workload, warm-up, drain, sweep, A/B settings, the model
runner it pins), its thresholds, the request bodies and built-in schemas of the workload, what
the plan costs on its runner (cost.py), and the built-in plans (builtin/*.yaml)."""

from gate.core.exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "spec": ["Plan", "ServerSpec", "TinyModelSpec", "WorkloadSpec", "apply_overrides", "load_plan"],
    "thresholds": ["Thresholds"],
})
