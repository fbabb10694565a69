"""`gate publish` against the fake GitHub server: sticky comment, turn to fail, fork 403,
step summary, outputs, annotations, and the token never leaving the process."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from fake_github import FakeGitHub

from gate.cli import main as gate_cli_main
from gate.errors import GateError
from gate.github import GitHubClient
from gate.hunks import Hunk, HunkSet
from gate.publish import (
    MAX_COMMENT_CHARS,
    CommentFile,
    annotations,
    escape_data,
    escape_property,
    find_sticky,
    marker,
    outcome_of,
    post_comment_file,
    publish,
    render_body,
    write_outputs,
)
from gate.settings import Settings
from gate.verdict import Outcome, Verdict

TOKEN = "ghs_SuperSecretToken0123456789"


@pytest.fixture
def fake():
    with FakeGitHub() as server:
        server.good_tokens.add(TOKEN)
        yield server


def make_verdict(tmp_path: Path, outcome: Outcome, name: str = "verdict.json") -> Path:
    verdict = Verdict(
        outcome=outcome,
        headline=f"{outcome.value.upper()}: drain req/min -48% (121 vs 233)",
        mode="baseline",
    )
    path = tmp_path / name
    path.write_text(verdict.model_dump_json())
    return path


def make_report(tmp_path: Path, text: str = "## Perf gate\n\nall fine\n") -> Path:
    path = tmp_path / "report.md"
    path.write_text(text)
    return path


def make_hunks(tmp_path: Path) -> Path:
    hunks = HunkSet(
        repo="vllm",
        base="main",
        head="pr",
        merge_base="abc",
        watch=["vllm/v1/structured_output/**"],
        hunks=[
            Hunk(path="vllm/v1/sample/sampler.py", new_start=10, new_lines=3, score=9.0),
            Hunk(
                path="vllm/v1/structured_output/utils.py",
                new_start=120,
                new_lines=8,
                section="def apply_grammar_bitmask(",
                mechanisms=["pin_memory", "per_step_alloc"],
                score=5.0,
            ),
            Hunk(path="vllm/old.py", change="deleted", old_start=1, old_lines=4, score=99),
        ],
    )
    path = tmp_path / "hunks.json"
    path.write_text(hunks.model_dump_json())
    return path


def settings_for(fake: FakeGitHub, tmp_path: Path, token: str | None = TOKEN, **kw) -> Settings:
    env = {
        "GITHUB_REPOSITORY": fake.repository,
        "GITHUB_API_URL": fake.url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GITHUB_RUN_ID": "99",
        "GATE_PR_NUMBER": "12",
        "GATE_COMMENT_FILE": str(tmp_path / "gate-comment.json"),
    }
    if token:
        env["GITHUB_TOKEN"] = token
    return Settings.from_env(env).model_copy(update=kw)


def fast_client(settings: Settings) -> GitHubClient:
    return GitHubClient(
        settings.api_url, settings.repository, settings.github_token, sleep=lambda s: None
    )


def run_publish(settings, tmp_path, outcome=Outcome.PASS, hunks=False, report=None):
    out, err = io.StringIO(), io.StringIO()
    code = publish(
        settings,
        make_report(tmp_path, report) if report else make_report(tmp_path),
        make_verdict(tmp_path, outcome),
        make_hunks(tmp_path) if hunks else None,
        client_factory=fast_client,
        out=out,
        err=err,
    )
    return code, out.getvalue(), err.getvalue()


def read_outputs(path: Path) -> dict[str, str]:
    text = path.read_text()
    pattern = r"^([\w-]+)<<(ghadelimiter_[\w-]+)\n(.*?)\n\2$"
    return {m[0]: m[2] for m in re.findall(pattern, text, re.M | re.S)}


def test_sticky_comment_created_then_updated_in_place(fake, tmp_path):
    s = settings_for(fake, tmp_path)
    code, _, _ = run_publish(s, tmp_path, Outcome.PASS)
    assert code == 0
    assert len(fake.comments[12]) == 1
    first = fake.comments[12][0]
    assert marker("default") in first["body"] and "all fine" in first["body"]
    code, _, _ = run_publish(s, tmp_path, Outcome.INCONCLUSIVE, report="second report\n")
    assert code == 3
    assert len(fake.comments[12]) == 1
    assert fake.comments[12][0]["id"] == first["id"]
    assert "second report" in fake.comments[12][0]["body"]
    assert len(fake.requests_to("PATCH")) == 1
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "updated"


def test_sticky_comment_found_on_page_three(fake, tmp_path):
    for i in range(230):
        fake.add_comment(12, f"chatter {i}")
    ours = fake.add_comment(12, render_body("old", Outcome.PASS, "default"), "gate-bot[bot]")
    fake.add_comment(12, "more chatter")
    run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.PASS)
    pages = [r.query.get("page", ["1"])[0] for r in fake.requests_to("GET", "/comments")]
    assert pages == ["1", "2", "3"]
    assert fake.requests_to("PATCH")[0].path.endswith(f"/issues/comments/{ours['id']}")
    assert not fake.requests_to("POST")


def test_marker_ids_keep_separate_comments(fake, tmp_path):
    run_publish(settings_for(fake, tmp_path, marker_id="a100"), tmp_path)
    run_publish(settings_for(fake, tmp_path, marker_id="h100"), tmp_path)
    run_publish(settings_for(fake, tmp_path, marker_id="a100"), tmp_path)
    assert len(fake.comments[12]) == 2
    assert len(fake.requests_to("PATCH")) == 1


def test_new_comment_when_verdict_turns_to_fail(fake, tmp_path):
    s = settings_for(fake, tmp_path)
    run_publish(s, tmp_path, Outcome.PASS)
    code, _, _ = run_publish(s, tmp_path, Outcome.FAIL)
    assert code == 1
    assert len(fake.comments[12]) == 2
    assert outcome_of(fake.comments[12][-1]["body"]) == "fail"
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "created-on-fail"
    # still failing: the fail comment is updated, no third comment
    run_publish(s, tmp_path, Outcome.FAIL)
    assert len(fake.comments[12]) == 2
    # back to pass: the latest (the fail one) is updated
    run_publish(s, tmp_path, Outcome.PASS)
    assert len(fake.comments[12]) == 2
    assert outcome_of(fake.comments[12][-1]["body"]) == "pass"
    assert outcome_of(fake.comments[12][0]["body"]) == "pass"


def test_first_comment_that_is_a_fail_is_just_created(fake, tmp_path):
    run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.FAIL)
    assert len(fake.comments[12]) == 1
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "created"


def test_fork_403_writes_comment_file_and_keeps_exit_code(fake, tmp_path):
    s = settings_for(fake, tmp_path, token="fork-token")
    code, _, err = run_publish(s, tmp_path, Outcome.FAIL)
    assert code == 1
    assert 12 not in fake.comments
    handover = CommentFile.model_validate_json((tmp_path / "gate-comment.json").read_text())
    assert handover.pr == 12 and handover.outcome == Outcome.FAIL
    assert marker("default") in handover.body
    assert "no permission" in handover.reason
    assert "::notice" in err
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs["comment-action"] == "file"
    assert outputs["comment-file"] == str(tmp_path / "gate-comment.json")


def test_no_pr_number_writes_file(fake, tmp_path):
    s = settings_for(fake, tmp_path, pr_number=None)
    code, _, _ = run_publish(s, tmp_path, Outcome.PASS)
    assert code == 0
    assert json.loads((tmp_path / "gate-comment.json").read_text())["pr"] is None
    assert not fake.requests


def test_github_down_writes_file_and_warns(fake, tmp_path):
    fake.fail_next(503, times=20)
    code, _, err = run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.ERROR)
    assert code == 4
    assert "::warning" in err and "gave up" in err
    assert (tmp_path / "gate-comment.json").exists()


def test_step_summary_and_outputs(fake, tmp_path):
    (tmp_path / "summary.md").write_text("earlier step\n")
    run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.INCONCLUSIVE)
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("earlier step\n## Perf gate")
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs["verdict"] == "inconclusive"
    assert outputs["exit-code"] == "3"
    assert outputs["headline"].startswith("INCONCLUSIVE")
    assert outputs["report-path"] == str(tmp_path / "report.md")
    assert outputs["verdict-path"] == str(tmp_path / "verdict.json")
    assert outputs["comment-url"].startswith("https://github.com/octo/vllm/pull/12#issuecomment-")


def test_outputs_are_multiline_safe(tmp_path):
    path = tmp_path / "out"
    write_outputs(path, {"a": "line1\nline2", "b": "x"})
    assert read_outputs(path) == {"a": "line1\nline2", "b": "x"}


def test_annotations_on_fail_mechanism_first(fake, tmp_path):
    code, out, _ = run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.FAIL, hunks=True)
    lines = out.splitlines()
    assert len(lines) == 2  # the deleted hunk has no head line
    assert lines[0].startswith(
        "::warning file=vllm/v1/structured_output/utils.py,line=120,endLine=127,title="
    )
    assert "touches pin_memory, per_step_alloc" in lines[0]
    assert "%0AIn%3A" not in lines[0] and "%0AIn: def apply_grammar_bitmask(" in lines[0]
    assert lines[1].startswith("::warning file=vllm/v1/sample/sampler.py,line=10,endLine=12,")


def test_no_annotations_unless_fail(fake, tmp_path):
    _, out, _ = run_publish(settings_for(fake, tmp_path), tmp_path, Outcome.PASS, hunks=True)
    assert out == ""


def test_annotation_escaping():
    assert escape_data("50%\r\nnext") == "50%25%0D%0Anext"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    hunks = HunkSet(
        repo="r",
        base="b",
        head="h",
        merge_base="m",
        watch=[],
        hunks=[Hunk(path="x,y:z.py", new_start=1, new_lines=1, section="::error::injected\n")],
    )
    verdict = Verdict(outcome=Outcome.FAIL, headline="FAIL: 100% slower", mode="ab")
    (line,) = annotations(hunks, verdict, prefix="src/")
    assert line.startswith("::warning file=src/x%2Cy%3Az.py,line=1,endLine=1,title=")
    message = line.split("::", 2)[2]
    assert "\n" not in line and "100%25 slower" in message
    assert "In: ::error::injected%0A" in message  # data keeps ':' but cannot start a command


def test_body_is_trimmed_under_github_limit():
    report = "```diff\n" + ("+ x = 1\n" * 20_000)
    body = render_body(report, Outcome.FAIL, "default", "https://github.com/o/r/actions/runs/1")
    assert len(body) < MAX_COMMENT_CHARS
    assert body.count("```") % 2 == 0
    assert "report trimmed" in body


def test_find_sticky_matches_the_exact_marker():
    comments = [{"id": 1, "body": marker("default2")}, {"id": 2, "body": "quote default"}]
    assert find_sticky(comments, "default") is None


def test_token_never_printed_nor_written(fake, tmp_path, capsys):
    """Run publish through the CLI with a token, on every path, and look everywhere."""
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": fake.repository,
        "GITHUB_API_URL": fake.url,
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "GATE_PR_NUMBER": "12",
    }
    mp = pytest.MonkeyPatch()
    for key, value in env.items():
        mp.setenv(key, value)
    report, hunks = make_report(tmp_path), make_hunks(tmp_path)
    try:
        for outcome in (Outcome.PASS, Outcome.FAIL):
            verdict = make_verdict(tmp_path, outcome)
            gate_cli_main(
                [
                    "publish",
                    "--report",
                    str(report),
                    "--verdict",
                    str(verdict),
                    "--hunks",
                    str(hunks),
                    "--comment-file",
                    str(tmp_path / "c.json"),
                ]
            )
        fake.fail_next(403, times=1, message="Resource not accessible by integration")
        gate_cli_main(
            [
                "publish",
                "--report",
                str(report),
                "--verdict",
                str(verdict),
                "--comment-file",
                str(tmp_path / "c.json"),
            ]
        )
        assert repr(Settings.from_env()).count(TOKEN) == 0
    finally:
        mp.undo()
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    assert (tmp_path / "c.json").exists()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
    assert all(TOKEN not in json.dumps(c) for c in fake.comments.get(12, []))
    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fake.requests)


def test_post_comment_file_validates_pr_and_head(fake, tmp_path):
    fake.pulls[12] = {"number": 12, "head": {"sha": "a" * 40}}
    s = settings_for(fake, tmp_path)
    handover = CommentFile(
        pr=12,
        marker_id="default",
        outcome=Outcome.PASS,
        body=render_body("from the artifact", Outcome.PASS, "default"),
    )
    path = tmp_path / "gate-comment.json"
    path.write_text(handover.model_dump_json())
    with pytest.raises(GateError, match="refusing to post"):
        post_comment_file(s, path, expect_head_sha="b" * 40, client_factory=fast_client)
    assert not fake.requests_to("POST")
    assert post_comment_file(s, path, expect_head_sha="a" * 40, client_factory=fast_client) == 0
    (comment,) = fake.comments[12]
    assert comment["body"].count(marker("default")) == 1
    assert "from the artifact" in comment["body"]
    # a second post updates the same comment
    post_comment_file(s, path, expect_head_sha="a" * 40, client_factory=fast_client)
    assert len(fake.comments[12]) == 1


@pytest.mark.parametrize(
    "pr, message",
    [('"12; rm -rf /"', "pr"), ("12.5", "pr"), ("-3", "pr"), ("true", "pr")],
)
def test_comment_file_rejects_non_integer_pr(tmp_path, pr, message):
    path = tmp_path / "c.json"
    path.write_text(f'{{"pr": {pr}, "outcome": "pass", "body": "x"}}')
    from gate.publish import load_comment_file

    with pytest.raises(GateError, match=message):
        load_comment_file(path)


def test_comment_file_rejects_bad_marker(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"pr": 1, "outcome": "pass", "body": "x", "marker_id": "a -->"}')
    from gate.publish import load_comment_file

    with pytest.raises(GateError, match="marker_id"):
        load_comment_file(path)


def test_publish_cli_requires_report_and_verdict(tmp_path, monkeypatch, capsys):
    assert gate_cli_main(["publish"]) == 2
    assert "--report and --verdict" in capsys.readouterr().err


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


def test_matrix_reports_merge_under_one_marker(fake, tmp_path):
    paths = []
    for runner, outcome in (("a100", Outcome.PASS), ("h100", Outcome.FAIL)):
        folder = tmp_path / f"perf-gate-results-{runner}"
        folder.mkdir()
        (folder / "report.md").write_text(f"report of {runner}\n" + "x" * 60_000)
        paths.append((folder / "report.md", make_verdict(folder, outcome)))
    s = settings_for(fake, tmp_path, marker_id="matrix")
    code = publish(
        s,
        [p[0] for p in paths],
        [p[1] for p in paths],
        labels=["a100", "h100"],
        client_factory=fast_client,
        out=io.StringIO(),
        err=io.StringIO(),
    )
    assert code == 1
    (comment,) = fake.comments[12]
    body = comment["body"]
    assert len(body) < MAX_COMMENT_CHARS
    assert marker("matrix") in body and outcome_of(body) == "fail"
    first_line = body.split("-->\n")[2].splitlines()[0]
    assert first_line.startswith("**FAIL") and "worst of 2: h100" in first_line
    assert "### a100" in body and "### h100" in body
    assert "report of a100" in body and "report of h100" in body
