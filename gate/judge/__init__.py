"""From results to a verdict: the checks a plan judges, the sequential paired A/B
statistics, noise calibrations, stored baselines, the validity of a run, and the verdict
with its outcome and exit code."""

from gate.judge.baseline import Baseline
from gate.judge.compare import ABReference, BaselineReference, NoReference, compare_results
from gate.judge.noise import Noise, NoiseCalibration, noise_for
from gate.judge.verdict import Check, Outcome, Verdict, load_verdict

__all__ = ["Check", "Outcome", "Verdict", "load_verdict", "compare_results", "ABReference",
           "BaselineReference", "NoReference", "Noise", "NoiseCalibration", "noise_for",
           "Baseline"]
