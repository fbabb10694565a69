"""From results to a verdict: the checks a plan judges, the sequential paired A/B
statistics, noise calibrations, stored baselines, the validity of a run, and the verdict
with its outcome and exit code."""
