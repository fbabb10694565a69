"""benchmarks/noise_simulation.py: the tables of docs/compare.md are generated from the kept
calibration files (their hashes in the text), through the functions gate ab calls; a file
that cannot be the truth for the shipped plan is named with why."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys

from support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "noise_simulation.py"


def module():
    spec = importlib.util.spec_from_file_location("noise_simulation", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["noise_simulation"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def generated() -> str:
    doc = (REPO_ROOT / "docs" / "compare.md").read_text()
    sim = module()
    found = re.search(re.escape(sim.BEGIN) + "(.*?)" + re.escape(sim.END), doc, re.S)
    assert found, "docs/compare.md has no generated tables"
    return found.group(1)


def test_the_docs_tables_are_of_the_kept_calibrations_as_they_are():
    """A kept calibration that changed without the tables being written again fails here."""
    text = generated()
    sim = module()
    assert sim.KEPT
    for path in sim.KEPT:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        assert f"`{path.relative_to(REPO_ROOT)}` (sha256 {digest})" in text
    assert "from nothing (no calibration)" in text and "2x too small" in text


def test_a_short_run_judges_the_truth_and_names_a_file_it_cannot_use():
    sim = module()
    args = sim.parse(["--calibrations", "2", "--paths", "40"])
    text = sim.render(args)
    assert "| from nothing (no calibration)" in text
    assert "10-block calibration, 1.5x too small" in text
    assert "cpu-smoke--cpu-amd-epyc.yaml" in text and "no spread between server pairs in " \
        "blocks of 2" in text
    truth = sim.truth_of(sim.KEPT[0], "cpu-smoke")
    assert not isinstance(truth, str) and len(truth.slots) == 5
    assert truth.spreads["sweep.c8.tpot_p50_ms"].between == 0.0  # pooled as gate ab pools it
