"""A plan the build refuses (issue 26, item 7): vLLM checks its configuration at start-up and
raises before it serves; the gate reads vLLM's reason from the server's log
(gate.measure.server.refusal) and says "this build refuses the plan: <reason>", not a crash."""

from __future__ import annotations

import traceback

from pydantic import ValidationError
from pydantic.dataclasses import dataclass

from gate.judge.first_cause import cause_line, condensed
from gate.measure.server import refusal

REASON = "Model Runner V2 does not yet support: speculative decoding (ngram)"
HEAD = ("(APIServer pid=21807) INFO 01-12 09:14:02 [api_utils.py:327] vLLM server version "
        "0.33.0, serving model google/gemma-4-26B-A4B-it\n")


@dataclass
class VllmConfig:
    """vLLM's configuration is a pydantic dataclass whose checks raise ValueError
    (vllm/config/vllm.py, _validate_v2_model_runner)."""

    speculative: str = ""

    def __post_init__(self) -> None:
        if self.speculative:
            raise ValueError(REASON)


def traceback_of_refusal() -> str:
    """What `vllm serve` prints when the check fails: pydantic's ValidationError, uncaught."""
    try:
        VllmConfig(speculative="ngram")
    except ValidationError:
        return traceback.format_exc()
    raise AssertionError("the configuration check did not raise")


def test_vllms_reason_from_pydantics_validation_error(tmp_path):
    text = traceback_of_refusal()
    assert f"  Value error, {REASON} [type=value_error" in text  # pydantic's own wording
    log = tmp_path / "server.log"
    log.write_text(HEAD + text)
    assert refusal(log) == REASON


def test_a_plain_value_error_and_the_last_of_several(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEAD + "Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                   "ValueError: --max-num-seqs 0 is not a valid value\n"
                   "Traceback (most recent call last):\n"
                   f"vllm.config.errors.ValueError: {REASON}\n")
    assert refusal(log) == REASON
    log.write_text(HEAD + f"NotImplementedError: {'x' * 400}\n")
    assert refusal(log) == "x" * 300  # cut: a headline, not a dump


def test_a_crash_is_not_a_refusal(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(HEAD + "Traceback (most recent call last):\n"
                   "RuntimeError: operator torchvision::nms does not exist\n")
    assert refusal(log) is None
    assert refusal(tmp_path / "no-such.log") is None


def test_the_headline_of_a_refusal_names_the_build_and_vllms_reason_once():
    error = (f"head run error: this build refuses the plan: {REASON} (vllm serve exited with "
             "code 1); last lines of /out/head/block1/server.log:\n" + HEAD
             + traceback_of_refusal())
    assert cause_line([error, "head results hold no measured cells"]) == (
        f"the head build refuses the plan: {REASON} (vllm serve exited with code 1)")


def test_a_refusal_at_a_first_start_is_said_without_the_log_tail():
    """gate.flows.first_start names the build with condensed(): vLLM's reason once, not the
    log's last error-looking line (pydantic's 'For further information visit ...')."""
    error = (f"this build refuses the plan: {REASON} (vllm serve exited with code 1); last "
             "lines of /out/head/first-start/server.log:\n" + HEAD + traceback_of_refusal())
    assert condensed(error) == f"this build refuses the plan: {REASON} (vllm serve exited with code 1)"
