"""From results to a verdict: the checks a plan judges, the sequential paired A/B
statistics, noise calibrations, stored baselines, the validity of a run, and the verdict
with its outcome and exit code."""

from gate.core.exports import lazy_exports

__getattr__, __all__ = lazy_exports(__name__, {
    "baseline": ["Baseline"],
    "compare": ["compare_results", "ABReference", "BaselineReference", "NoReference"],
    "noise": ["Noise", "NoiseCalibration", "noise_for"],
    "verdict": ["Check", "Outcome", "Verdict", "load_verdict"],
})
