"""gate publish's pure parts: which comment is ours, GITHUB_OUTPUT values, annotation
escaping, the comment file's validation, settings from the event, and the command's input
errors (integration/test_publish.py publishes to the fake GitHub server)."""

from __future__ import annotations

import json
import re

import pytest
from support import factories as f
from support.action_runner import read_outputs
from support.cli import gate_in_process
from support.fake_github import GITHUB_ACTIONS

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.evidence.hunks import Hunk, HunkSet
from gate.github.comment_file import load_comment_file
from gate.github.publish import (
    find_sticky,
    hunk_annotations,
    marker,
    outcome_of,
)
from gate.github.workflow_commands import escape_data, escape_property, write_outputs
from gate.judge.verdict import Outcome, Verdict
from gate.report.render import outcome_tag


def test_only_a_marker_on_the_first_line_counts():
    login = GITHUB_ACTIONS
    quoted = {"id": 1, "user": {"login": login}, "body": "see\n" + f.sticky_body(Outcome.PASS)}
    other = {"id": 2, "user": {"login": login}, "body": f.sticky_body(Outcome.PASS, "default2")}
    assert find_sticky([quoted, other], "default", login) is None
    hidden_tag = f"{marker('default')}\nx\n{outcome_tag(Outcome.FAIL)}\n"
    assert outcome_of(hidden_tag) is None


def test_outputs_are_multiline_safe(tmp_path):
    path = tmp_path / "out"
    write_outputs(path, {"a": "line1\nline2", "b": "x"})
    assert path.read_text().startswith("a<<ghadelimiter_")  # the heredoc form, for any value
    assert read_outputs(path) == {"a": "line1\nline2", "b": "x"}


def test_annotation_data_and_properties_are_escaped_so_nothing_is_a_command():
    assert escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    hunks = HunkSet(repo="r", base="b", head="h", merge_base="m", watch=[], hunks=[
        Hunk(path="x,y:z.py", new_start=1, new_lines=1, section="::error::injected\n")])
    v = Verdict(outcome=Outcome.FAIL, headline="FAIL: 100% slower", mode="ab")
    (line,) = hunk_annotations(hunks, v, prefix="src/")
    assert line.startswith("::warning file=src/x%2Cy%3Az.py,line=1,endLine=1,title=")
    message = line.split("::", 2)[2]
    assert "\n" not in line and "100%25 slower" in message
    assert "In: ::error::injected%0A" in message  # data keeps ':' but cannot start a command


def test_a_path_with_a_newline_and_error_command_stays_one_annotation():
    """A watched file named 'evil\\n::error title=Perf gate::PASS.py' prints one ::warning
    line and no line that starts a workflow command of its own."""
    path = "vllm/v1/sample/evil\n::error title=Perf gate::PASS\r\n.py"
    hunks = HunkSet(repo="r", base="b", head="h", merge_base="m", watch=[], hunks=[
        Hunk(path=path, new_start=3, new_lines=1, section="def f():\n::error::x")])
    v = Verdict(outcome=Outcome.FAIL, headline="FAIL: x\n::error::headline", mode="ab")
    lines = "\n".join(hunk_annotations(hunks, v)).split("\n")
    assert len(lines) == 1 and lines[0].startswith("::warning file=")
    assert "file=vllm/v1/sample/evil%0A%3A%3Aerror title=Perf gate%3A%3APASS%0D%0A.py," in lines[0]
    assert not any(line.startswith("::error") for line in re.split(r"[\r\n]", lines[0]))


@pytest.mark.parametrize("pr", ['"12; rm -rf /"', "12.5", "-3", "true"])
def test_comment_file_rejects_non_integer_pr(tmp_path, pr):
    path = f.comment_file(tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data).replace('"pr": 12', f'"pr": {pr}'))
    with pytest.raises(GateError, match="pr"):
        load_comment_file(path)


def test_comment_file_rejects_bad_marker_and_labels(tmp_path):
    path = f.comment_file(tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "marker_id": "a -->"}))
    with pytest.raises(GateError, match="marker_id"):
        load_comment_file(path)
    run = data["runs"][0]
    path.write_text(json.dumps({**data, "runs": [{**run, "label": "a100 <img>"}]}))
    with pytest.raises(GateError, match="label"):
        load_comment_file(path)
    path.write_text(json.dumps({**data, "runs": [run, run]}))
    with pytest.raises(GateError, match="distinct labels"):
        load_comment_file(path)


def test_publish_cli_needs_one_kind_of_input(tmp_path):
    proc = gate_in_process("publish")
    assert proc.returncode == 2
    assert "needs --verdict (one run) or --combine" in proc.stderr
    assert gate_in_process("publish", "--max-wait", "-1", "--verdict", "v.json").returncode == 2


def test_settings_read_pr_from_events(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 41}}))
    s = Settings.from_env({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event)})
    assert s.pr_number == 41
    event.write_text(json.dumps({"inputs": {"pr": "42"}}))
    s = Settings.from_env(
        {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_EVENT_PATH": str(event)}
    )
    assert s.pr_number == 42
    event.write_text(json.dumps({"inputs": {"pr": ""}}))
    s = Settings.from_env(
        {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_EVENT_PATH": str(event)}
    )
    assert s.pr_number is None
    assert s.api_url == "https://api.github.com"
    with pytest.raises(GateError):
        Settings.from_env({"GATE_PR_NUMBER": "1 && echo"})


def test_combine_rejects_a_label_count_mismatch(tmp_path):
    path = f.comment_file(tmp_path)
    proc = gate_in_process("publish", "--combine", path, "--label", "a", "--label", "b")
    assert proc.returncode == 2 and "one --label per --combine file" in proc.stderr
