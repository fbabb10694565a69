#!/usr/bin/env bash
# Regenerate the hash-pinned locks (requirements/*.txt: the jobs that hold a GitHub token, and
# the GPU jobs' whole gate runtime, gpu.txt)
# from their inputs (requirements/*.in): every version pinned, every file's sha256 listed, for
# the Python the workflows set up (3.11) on any platform. Needs uv (pip install uv) and PyPI.
# docs/security.md, "Hash-pinned installs in the token jobs".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for name in poster nightly-update gpu; do
  uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
    --index-url https://pypi.org/simple \
    --custom-compile-command "scripts/lock.sh" \
    --output-file "requirements/$name.txt" "requirements/$name.in"
done
