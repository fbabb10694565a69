"""A plan whose server is the stand-in `vllm serve` (tests/support/fake_vllm.py): cpu-smoke's
checks on a server that starts in a second and streams like vLLM, for the tests of what the
gate does around a server rather than of vLLM itself."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from gate.plan.spec import load_plan
from support.paths import REPO_ROOT

FAKE = REPO_ROOT / "tests" / "support" / "fake_vllm.py"


def fake_plan(tmp_path: Path, servers: str = "persistent") -> Path:
    """plan.yaml in `tmp_path`: one sweep level of half-second cells, no drain, 2 rounds."""
    data = load_plan("cpu-smoke").model_dump(mode="json", exclude_none=True)
    data["server"].pop("tiny_model")
    data["server"].update(model="fake-org/fake-model", launch="command",
                          command=[sys.executable, str(FAKE)], startup_timeout_s=60)
    data["warmup"] = {"requests": 2, "concurrency": 2}
    data["drain"] = {"enabled": False}
    data["sweep"].update(levels=[2], window_s=0.5, max_window_s=5, min_requests_factor=2)
    data["ab"] = {"servers": servers, "max_rounds": 2}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
