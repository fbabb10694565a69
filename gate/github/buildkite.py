"""Publishing on Buildkite, where vLLM's GPU CI runs: the report as the build's annotation,
through the agent's own command (`buildkite-agent annotate`, the report on its stdin), one
annotation per context so that a rerun replaces it.

The annotation is the same document as the job summary (gate.report.render), fitted to
ANNOTATION_LIMIT; its style follows the verdict. The PR comment does not go from here: the
measuring step runs the PR's code and holds no token, so it leaves the comment file (gate
publish without a token) for a trusted step to post (docs/buildkite.md).
"""

from __future__ import annotations

import subprocess

from gate.core.errors import GateError
from gate.judge.verdict import Outcome

# Buildkite caps an annotation's body at 1 MiB; a report far smaller than that is kept.
ANNOTATION_LIMIT = 200_000
STYLES = {Outcome.PASS: "success", Outcome.FAIL: "error", Outcome.INCONCLUSIVE: "warning",
          Outcome.ERROR: "error"}
AGENT_TIMEOUT_S = 120


def style_for(outcome: Outcome) -> str:
    return STYLES.get(outcome, "warning")


def annotate(body: str, *, style: str, context: str, agent: str = "buildkite-agent") -> None:
    """`buildkite-agent annotate --style STYLE --context CONTEXT`, the body on stdin."""
    if style not in ("success", "info", "warning", "error"):
        raise GateError(f"annotation style {style!r}: success, info, warning or error")
    try:
        proc = subprocess.run([agent, "annotate", "--style", style, "--context", context],
                              input=body, text=True, capture_output=True,
                              timeout=AGENT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GateError(f"{agent} is not on PATH: gate buildkite annotate runs in a Buildkite "
                        "job (the agent provides it)") from None
    except subprocess.TimeoutExpired:
        raise GateError(f"{agent} annotate did not finish in {AGENT_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise GateError(f"{agent} annotate failed (exit {proc.returncode}): "
                        f"{said[-1] if said else 'no message'}")
