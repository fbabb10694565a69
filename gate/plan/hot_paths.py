"""The structured-output hot paths of vLLM's source tree: the files whose hunks a PR comment
shows, whose digest a build's fingerprint carries, and how a path glob matches.

The structured-output decode path of both model runners (docs/background.md#where-a-gate-must-look):
V1's runner, input batch and bitmask staging (structured_output/utils.py), V2's runner, input
batch, sampler, speculation and bitmask path (gpu/structured_outputs.py, gpu/buffer_utils.py),
and what both use.
"""

from __future__ import annotations

import re

WATCHED_PATHS = (
    "vllm/v1/structured_output/**",
    "vllm/v1/worker/gpu/buffer_utils.py",
    "vllm/v1/worker/gpu/structured_outputs.py",
    "vllm/v1/worker/gpu/model_runner.py",
    "vllm/v1/worker/gpu/input_batch.py",
    "vllm/v1/worker/gpu/sample/**",
    "vllm/v1/worker/gpu/spec_decode/**",
    "vllm/v1/worker/gpu_model_runner.py",
    "vllm/v1/worker/gpu_input_batch.py",
    "vllm/utils/torch_utils.py",
    "vllm/v1/sample/**",
    "vllm/v1/spec_decode/**",
    "vllm/v1/core/sched/**",
    "requirements/common.txt",
)


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """`**` crosses folders, `*` and `?` do not; a glob without wildcards names a file or a
    whole folder; a trailing `/` means the folder's whole subtree."""
    if glob.endswith("/"):
        glob += "**"
    parts = re.split(r"(\*\*/|\*\*|\*|\?)", glob)
    table = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}
    body = "".join(table.get(p, re.escape(p)) for p in parts)
    if not re.search(r"[*?]", glob):
        body += "(?:/.*)?"
    return re.compile(body + r"\Z", re.DOTALL)


def watched(path: str, globs: list[str] | tuple[str, ...]) -> bool:
    return any(glob_to_regex(g).match(path) for g in globs)
