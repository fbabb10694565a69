#!/usr/bin/env bash
# GPU evidence on one lent GPU, in under ten minutes (each step has its own time limit):
#
#   1. doctor          gate doctor on the GPU runner (nvidia-smi, PID namespace, threads)
#   2. staging         vLLM's per-step bitmask staging on this GPU, 64 and 384 x 8,192 int32:
#                      a fresh torch.full(..., pin_memory=True) per step, a reused pinned
#                      buffer, np.full, and vLLM's own async_tensor_h2d
#                      (benchmarks/bitmask_staging.py)
#   3. ab-aa           a short gate ab A/A: the same build on both sides
#   4. ab-slow         gate ab with tests/fixtures/slow_bitmask on the head (host CPU burnt in
#                      V1's apply_grammar_bitmask, half a healthy guided step): should fail
#   5. calibrate       gate calibrate, 3 A/A rounds, a noise profile of this GPU
#
# Steps 3-5 serve the gate's tiny 262,144-token model (benchmarks/gpu_check_plan.yaml: both
# servers up, 64 sequences, ngram k=5, V1 runner) and need a vLLM GPU build in PYTHON; without
# one they are skipped and say so. Nothing of the gate depends on this script.
#
#   benchmarks/gpu_check.sh [--dry-run] [--out DIR] [--python PY]
#
# --dry-run prints every command with its time limit and runs nothing. Figures go to OUT
# (default gpu-check/), one log per step; a summary ends the output.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="gpu-check"
python="${PYTHON:-python3}"
dry_run=0
while [ "$#" -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --out) out="$2"; shift ;;
    --python) python="$2"; shift ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

python="$(command -v "$python" || echo "$python")"  # gate ab wants the interpreter's path
plan="$root/benchmarks/gpu_check_plan.yaml"
fixture="$root/tests/fixtures/slow_bitmask"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
gate=("$python" -m gate.cli)
summary=()

# run_step NAME SECONDS COMMAND...: the command under `timeout`, its output in OUT/NAME.log.
run_step() {
  local name="$1" limit="$2"
  shift 2
  echo "+ [$name, at most ${limit}s] $*"
  if [ "$dry_run" = 1 ]; then
    return 0
  fi
  local status=0
  timeout --kill-after=15 "$limit" "$@" > "$out/$name.log" 2>&1 || status=$?
  tail -n 25 "$out/$name.log"
  summary+=("$name: exit $status")
}

skip() {
  echo "+ [$1] skipped: $2"
  summary+=("$1: skipped ($2)")
}

[ "$dry_run" = 1 ] || mkdir -p "$out"
echo "gpu_check: out $out, python $python"
if [ "$dry_run" = 0 ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi

run_step doctor 45 "${gate[@]}" doctor --python "$python" --json --out "$out/doctor.json"
run_step staging 90 "$python" "$root/benchmarks/bitmask_staging.py" --rows 64,384 \
  --steps 2000 --json "$out/staging.json"

if [ "$dry_run" = 0 ] && ! "$python" -c "import vllm, torch; assert torch.cuda.is_available()" \
    > /dev/null 2>&1; then
  for step in ab-aa ab-slow calibrate; do
    skip "$step" "no vLLM GPU build in $python"
  done
else
  run_step ab-aa 120 "${gate[@]}" ab --plan "$plan" --base "$python" --head "$python" \
    --rounds 2 --profile never --out "$out/ab-aa" --noise-dir "$out/noise" --quiet
  run_step ab-slow 120 "${gate[@]}" ab --plan "$plan" --base "$python" --head "$python" \
    --head-env "PYTHONPATH=$fixture" --head-env GATE_FIXTURE_STEP_FRACTION=0.5 \
    --rounds 2 --profile never --out "$out/ab-slow" --noise-dir "$out/noise" --quiet
  run_step calibrate 180 "${gate[@]}" calibrate --plan "$plan" --python "$python" \
    --rounds 3 --noise-dir "$out/noise" --out "$out/calibrate" --quiet
fi

if [ "$dry_run" = 0 ]; then
  echo "== gpu_check summary"
  printf '%s\n' "${summary[@]}"
fi
