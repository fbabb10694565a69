"""Where things are, for tests in any folder under tests/."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
# The stand-in vLLM package (support/fake_vllm.py serves through it), first on a PYTHONPATH.
FAKE_VLLM = FIXTURES / "fake_vllm"
