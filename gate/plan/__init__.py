"""What to measure: the plan (server, workload, warm-up, drain, sweep, A/B settings), its
thresholds, the request bodies and schemas of the workload, and the built-in plans
(builtin/*.yaml)."""

from gate.plan.spec import Plan, ServerSpec, TinyModelSpec, WorkloadSpec, apply_overrides, load_plan
from gate.plan.thresholds import Thresholds

__all__ = ["Plan", "ServerSpec", "TinyModelSpec", "WorkloadSpec", "apply_overrides", "load_plan", "Thresholds"]
