"""What to measure: the plan (server, workload, warm-up, drain, sweep, A/B settings, the model
runner it pins), its thresholds, the request bodies and built-in schemas of the workload, what
the plan costs on its runner (cost.py), and the built-in plans (builtin/*.yaml)."""
