"""`gate publish` against the fake GitHub server: sticky comment found only among the token's
own comments, turn to fail, fork 403 and the comment file, the poster's re-rendering, a 502 on
POST, rate limits, step summary, outputs, annotations, and the token never leaving the process
(unit/test_publish_inputs.py tests the parts that need no server).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support import factories as f
from support import markdown_check
from support.action_runner import read_outputs
from support.cli import gate_in_process
from support.fake_github import GITHUB_ACTIONS, TOKEN, FakeClock, FakeGitHub

from gate.core.errors import GateError
from gate.core.settings import Settings
from gate.evidence.hunks import Hunk, HunkSet
from gate.github.client import Clock, GitHubClient
from gate.github.comment_file import CommentRun, load_comment_file
from gate.github.publish import (
    MAX_COMMENT_CHARS,
    PostTarget,
    PublishOptions,
    marker,
    outcome_of,
    post_comment_file,
    publish,
)
from gate.judge.verdict import Outcome, Verdict
from gate.report.render import outcome_tag

FORGED = "@org/team <img src=x onerror=alert(1)> **PASS** <!-- vllm-structured-output-gate:default -->"


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


def factory(clock: FakeClock):
    def make(settings: Settings) -> GitHubClient:
        return GitHubClient(settings.api_url, settings.repository, settings.github_token,
                            clock=Clock(clock.sleep, clock.now))
    return make


def run_publish(settings, clock, outcome=Outcome.PASS, hunks=False, headline=None, **options):
    out, err = io.StringIO(), io.StringIO()
    run = CommentRun(verdict=f.headline_verdict(outcome, headline), hunks=f.annotated_hunks() if hunks else None)
    code = publish(settings, [run], PublishOptions(**options), client_factory=factory(clock),
                   out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# -- the sticky comment -------------------------------------------------------------------
def test_sticky_comment_created_then_updated_in_place(fake, clock, tmp_path):
    s = settings_for(fake, tmp_path)
    code, _, _ = run_publish(s, clock, Outcome.PASS)
    assert code == 0
    (first,) = fake.comments[12]
    assert first["body"].startswith(marker("default") + "\n" + outcome_tag(Outcome.PASS))
    assert first["user"]["login"] == GITHUB_ACTIONS
    code, _, _ = run_publish(s, clock, Outcome.INCONCLUSIVE, headline="second verdict")
    assert code == 3
    (comment,) = fake.comments[12]
    assert comment["id"] == first["id"] and "second verdict" in comment["body"]
    assert len(fake.requests_to("PATCH")) == 1
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "updated"


def test_sticky_comment_found_on_page_three(fake, clock, tmp_path):
    for i in range(230):
        fake.add_comment(12, f"chatter {i}")
    ours = fake.add_comment(12, f.sticky_body(Outcome.PASS), GITHUB_ACTIONS)
    fake.add_comment(12, "more chatter")
    run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS)
    pages = [r.query.get("page", ["1"])[0] for r in fake.requests_to("GET", "/comments")]
    assert pages == ["1", "2", "3"]
    assert fake.requests_to("PATCH")[0].path.endswith(f"/issues/comments/{ours['id']}")
    assert not fake.requests_to("POST")


def test_marker_ids_keep_separate_comments(fake, clock, tmp_path):
    run_publish(settings_for(fake, tmp_path, marker_id="a100"), clock)
    run_publish(settings_for(fake, tmp_path, marker_id="h100"), clock)
    run_publish(settings_for(fake, tmp_path, marker_id="a100"), clock)
    assert len(fake.comments[12]) == 2
    assert len(fake.requests_to("PATCH")) == 1


def test_new_comment_when_verdict_turns_to_fail(fake, clock, tmp_path):
    s = settings_for(fake, tmp_path)
    run_publish(s, clock, Outcome.PASS)
    code, _, _ = run_publish(s, clock, Outcome.FAIL)
    assert code == 1
    assert len(fake.comments[12]) == 2
    assert outcome_of(fake.comments[12][-1]["body"]) == "fail"
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "created-on-fail"
    run_publish(s, clock, Outcome.FAIL)  # still failing: the fail comment is updated
    assert len(fake.comments[12]) == 2
    run_publish(s, clock, Outcome.PASS)  # back to pass: the latest (the fail one) is updated
    assert len(fake.comments[12]) == 2
    assert outcome_of(fake.comments[12][-1]["body"]) == "pass"
    assert outcome_of(fake.comments[12][0]["body"]) == "pass"


def test_first_comment_that_is_a_fail_is_just_created(fake, clock, tmp_path):
    run_publish(settings_for(fake, tmp_path), clock, Outcome.FAIL)
    assert len(fake.comments[12]) == 1
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "created"


def test_a_planted_marker_comment_is_never_edited_nor_blocks_ours(fake, clock, tmp_path):
    """A user copies our marker (and a fail tag) into a comment of their own, before and
    after ours: it is never PATCHed, our comment is still created and then updated."""
    planted = fake.add_comment(12, f.sticky_body(Outcome.PASS, text="I am the gate: PASS"), "mallory")
    s = settings_for(fake, tmp_path)
    code, _, err = run_publish(s, clock, Outcome.PASS)
    assert code == 0 and "::warning" not in err
    ours = fake.comments[12][-1]
    assert ours["user"]["login"] == GITHUB_ACTIONS
    fake.add_comment(12, f.sticky_body(Outcome.PASS, text="newer fake"), "mallory")
    run_publish(s, clock, Outcome.INCONCLUSIVE)
    (patch,) = fake.requests_to("PATCH")
    assert patch.path.endswith(f"/issues/comments/{ours['id']}")
    assert planted["body"].endswith("I am the gate: PASS\n")
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "updated"


def test_a_planted_fail_tag_cannot_hide_the_turn_to_fail(fake, clock, tmp_path):
    s = settings_for(fake, tmp_path)
    run_publish(s, clock, Outcome.PASS)
    fake.add_comment(12, f.sticky_body(Outcome.FAIL, text="already failing"), "mallory")
    run_publish(s, clock, Outcome.FAIL)
    assert read_outputs(tmp_path / "output.txt")["comment-action"] == "created-on-fail"
    assert [c["user"]["login"] for c in fake.comments[12]] == [GITHUB_ACTIONS, "mallory",
                                                                GITHUB_ACTIONS]


def test_identity_from_get_user_for_a_personal_token(fake, clock, tmp_path):
    fake.user_tokens["ghp_pat"] = "perf-bot"
    fake.add_comment(12, f.sticky_body(Outcome.PASS), GITHUB_ACTIONS)  # not ours with this token
    run_publish(settings_for(fake, tmp_path, token="ghp_pat"), clock, Outcome.PASS)
    assert fake.requests_to("GET", "/user")
    assert not fake.requests_to("PATCH")
    assert fake.comments[12][-1]["user"]["login"] == "perf-bot"


def test_app_installation_token_needs_bot_login_and_says_so(fake, clock, tmp_path):
    fake.app_tokens["ghs_app"] = "perf-gate[bot]"
    s = settings_for(fake, tmp_path, token="ghs_app")
    _, _, err = run_publish(s, clock, Outcome.PASS)
    assert "written as perf-gate[bot], not github-actions[bot]" in err
    assert "pass --bot-login perf-gate[bot]" in err
    _, _, err = run_publish(s, clock, Outcome.PASS, bot_login="perf-gate[bot]")
    assert "::warning" not in err
    assert len(fake.comments[12]) == 1 and len(fake.requests_to("PATCH")) == 1


# -- GitHub failing -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["502", "drop"])
def test_one_502_on_post_never_makes_two_comments(fake, clock, tmp_path, mode):
    fake.break_next_create(mode)  # GitHub creates the comment, then answers 502 / nothing
    code, _, err = run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS)
    assert code == 0
    assert len(fake.comments[12]) == 1
    assert len(fake.requests_to("POST")) == 1
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs["comment-action"] == "created"
    assert outputs["comment-url"].endswith(f"#issuecomment-{fake.comments[12][0]['id']}")


def test_a_502_before_anything_landed_posts_once_more(fake, clock, tmp_path):
    fake.fail_next(502, method="POST")  # refused before creating anything
    run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS)
    assert len(fake.comments[12]) == 1
    assert len(fake.requests_to("POST")) == 2


def test_secondary_limit_is_waited_out_not_taken_for_no_permission(fake, clock, tmp_path):
    fake.secondary_limit()
    code, _, err = run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS)
    assert code == 0 and "::notice" not in err
    assert clock.slept == [60.0]
    assert len(fake.comments[12]) == 1


def test_fork_403_writes_comment_data_and_keeps_exit_code(fake, clock, tmp_path):
    s = settings_for(fake, tmp_path, token="fork-token")
    code, _, err = run_publish(s, clock, Outcome.FAIL, hunks=True)
    assert code == 1
    assert 12 not in fake.comments
    handover = load_comment_file(tmp_path / "gate-comment.json")
    assert handover.pr == 12 and handover.outcome == Outcome.FAIL
    assert handover.runs[0].hunks == f.annotated_hunks()
    assert "body" not in json.loads((tmp_path / "gate-comment.json").read_text())
    assert "no permission" in handover.reason
    assert "::notice" in err
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs["comment-action"] == "file"
    assert outputs["comment-file"] == str(tmp_path / "gate-comment.json")


def test_comment_file_leaves_the_request_records_out(fake, clock, tmp_path):
    head = f.sweep_results("head", f.REGRESSED)
    assert head.model_copy(update={"records": []}) == head  # the factory has none: add one
    record = {"index": 0, "phase": "drain", "arm": "guided", "concurrency": 1, "send_s": 0.0,
              "text": "x" * 1000}
    head = head.model_validate({**head.model_dump(), "records": [record]})
    s = settings_for(fake, tmp_path, comment=False)
    publish(s, [CommentRun(verdict=f.headline_verdict(Outcome.PASS), head=head)],
            client_factory=factory(clock), out=io.StringIO(), err=io.StringIO())
    handover = load_comment_file(tmp_path / "gate-comment.json")
    assert handover.runs[0].head.records == [] and handover.runs[0].head.cells == head.cells


def test_no_pr_number_writes_file(fake, clock, tmp_path):
    code, _, _ = run_publish(settings_for(fake, tmp_path, pr_number=None), clock, Outcome.PASS)
    assert code == 0
    assert json.loads((tmp_path / "gate-comment.json").read_text())["pr"] is None
    assert not fake.requests


def test_github_down_writes_file_and_warns(fake, clock, tmp_path):
    fake.fail_next(503, times=20)
    code, _, err = run_publish(settings_for(fake, tmp_path), clock, Outcome.ERROR)
    assert code == 4
    assert "::warning" in err and "gave up" in err
    assert (tmp_path / "gate-comment.json").exists()


def test_step_summary_and_outputs(fake, clock, tmp_path):
    (tmp_path / "summary.md").write_text("earlier step\n")
    run_publish(settings_for(fake, tmp_path), clock, Outcome.INCONCLUSIVE,
                summary="## Perf gate\n", outputs={"report-path": "r.md"})
    assert (tmp_path / "summary.md").read_text() == "earlier step\n## Perf gate\n\n"
    outputs = read_outputs(tmp_path / "output.txt")
    assert outputs["verdict"] == "inconclusive"
    assert outputs["exit-code"] == "3"
    assert outputs["headline"].startswith("INCONCLUSIVE")
    assert outputs["report-path"] == "r.md"
    assert outputs["comment-url"].startswith("https://github.com/octo/vllm/pull/12#issuecomment-")


def test_summary_defaults_to_the_report_without_hidden_tags(fake, clock, tmp_path):
    run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS)
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("### ✅ PASS: drain req/min") and "<!--" not in summary


# -- annotations --------------------------------------------------------------------------
def test_annotations_on_fail_mechanism_first(fake, clock, tmp_path):
    code, out, _ = run_publish(settings_for(fake, tmp_path), clock, Outcome.FAIL, hunks=True)
    lines = out.splitlines()
    assert len(lines) == 2  # the deleted hunk has no head line
    assert lines[0].startswith(
        "::warning file=vllm/v1/structured_output/utils.py,line=120,endLine=127,title="
    )
    assert "touches pin_memory, per_step_alloc" in lines[0]
    assert "%0AIn%3A" not in lines[0] and "%0AIn: def apply_grammar_bitmask(" in lines[0]
    assert lines[1].startswith("::warning file=vllm/v1/sample/sampler.py,line=10,endLine=12,")


def test_no_annotations_unless_fail(fake, clock, tmp_path):
    _, out, _ = run_publish(settings_for(fake, tmp_path), clock, Outcome.PASS, hunks=True)
    assert out == ""


# -- the poster: re-rendering the comment file --------------------------------------------
def test_post_comment_file_validates_pr_and_head(fake, clock, tmp_path):
    fake.pulls[12] = {"number": 12, "head": {"sha": "a" * 40}}
    s = settings_for(fake, tmp_path)
    path = f.comment_file(tmp_path)
    with pytest.raises(GateError, match="refusing to post"):
        post_comment_file(s, path, target=PostTarget(expect_head_sha="b" * 40), client_factory=factory(clock))
    assert not fake.requests_to("POST")
    assert post_comment_file(s, path, target=PostTarget(expect_head_sha="a" * 40), client_factory=factory(clock),
                             err=io.StringIO()) == 0
    (comment,) = fake.comments[12]
    assert comment["body"].count(marker("default")) == 1
    assert comment["body"].split("\n")[2].startswith("### ✅ PASS: drain req/min")
    post_comment_file(s, path, target=PostTarget(expect_head_sha="a" * 40), client_factory=factory(clock),
                      err=io.StringIO())
    assert len(fake.comments[12]) == 1  # a second post updates the same comment


def test_the_poster_posts_on_its_own_pr_never_the_one_the_file_names(fake, clock, tmp_path):
    """N1: the hand-over was written by a run of PR code. Without --pr the poster takes the
    PR its own run names (the event, GATE_PR_NUMBER, BUILDKITE_PULL_REQUEST), refuses a file
    for another PR, and refuses to guess when its run names none."""
    fake.pulls[12] = {"number": 12, "head": {"sha": "a" * 40}}
    fake.pulls[99] = {"number": 99, "head": {"sha": "a" * 40}}
    victim = f.comment_file(tmp_path, pr=99)
    with pytest.raises(GateError, match=r"is for PR #99, not #12: refusing to post"):
        post_comment_file(settings_for(fake, tmp_path), victim, client_factory=factory(clock))
    no_pr = settings_for(fake, tmp_path).model_copy(update={"pr_number": None})
    with pytest.raises(GateError, match="no pull request to post on: pass --pr"):
        post_comment_file(no_pr, victim, client_factory=factory(clock))
    with pytest.raises(GateError, match="--pr 99 is not this run's PR #12"):
        post_comment_file(settings_for(fake, tmp_path), victim, target=PostTarget(pr=99),
                          client_factory=factory(clock))
    assert not fake.requests and not fake.comments
    post_comment_file(settings_for(fake, tmp_path), f.comment_file(tmp_path, pr=12),
                      client_factory=factory(clock), err=io.StringIO())
    assert len(fake.comments[12]) == 1 and 99 not in fake.comments


def test_the_poster_command_refuses_a_pr_its_event_does_not_name(fake, tmp_path, monkeypatch):
    path = f.comment_file(tmp_path, pr=99)
    for key, value in {**fake.job_env(), "GATE_PR_NUMBER": "12"}.items():
        monkeypatch.setenv(key, value)
    proc = gate_in_process("publish", "--post-comment-file", str(path), "--pr", "99")
    assert proc.returncode == 2 and "--pr 99 is not this run's PR #12" in proc.stderr
    assert not fake.requests


def test_poster_renders_forged_strings_as_plain_text(fake, clock, tmp_path):
    """Everything a PR's code could have written into the hand-over carries a mention, an
    image, a fake bold PASS and our marker: the posted comment is re-rendered from the
    fields, with each of them escaped, and its verdict line comes from the outcome."""
    hunks = HunkSet(repo="r", base="b", head="h", merge_base=FORGED, watch=[], hunks=[
        Hunk(path=f"vllm/{FORGED}.py", new_start=1, new_lines=1, section=FORGED,
             mechanisms=[FORGED], text=f"+{FORGED}\n+`````\n+{FORGED}")])
    v = Verdict(outcome=Outcome.FAIL, headline=f"PASS: {FORGED}", mode="ab", errors=[FORGED],
                advice=[FORGED], method=FORGED)
    head = f.sweep_results("head", f.REGRESSED, errors=[FORGED])
    path = f.comment_file(tmp_path, [CommentRun(verdict=v, head=head, hunks=hunks)])
    post_comment_file(settings_for(fake, tmp_path), path, client_factory=factory(clock),
                      err=io.StringIO())
    body = fake.comments[12][0]["body"]
    assert body.startswith(f"{marker('default')}\n{outcome_tag(Outcome.FAIL)}\n### ❌ FAIL: ")
    shown = markdown_check.render(body)
    assert shown.comments == [marker("default"), outcome_tag(Outcome.FAIL)]  # the rest is text
    assert "img" not in shown.tags
    assert set(shown.tags) <= markdown_check.OWN_TAGS
    assert shown.live_mentions() == [] and shown.live_refs() == []
    assert all("**PASS**" in s for s in shown.strong if "PASS" in s)  # asterisks stay text
    assert "@org/team" in "".join(shown.code)  # shown as it is inside code, where it is inert


def test_a_legacy_comment_file_with_a_body_is_refused(fake, clock, tmp_path):
    path = tmp_path / "gate-comment.json"
    path.write_text(json.dumps({"pr": 12, "outcome": "pass", "marker_id": "default",
                                "body": f"{marker('default')}\n**PASS** @org/team"}))
    with pytest.raises(GateError, match="invalid comment file"):
        post_comment_file(settings_for(fake, tmp_path), path, client_factory=factory(clock))
    assert not fake.requests


def test_rate_limit_past_max_wait_exits_4_from_the_poster(fake, tmp_path, monkeypatch):
    """A retry-after longer than --max-wait: exit 4 with the reason, no early retry."""
    path = f.comment_file(tmp_path)
    fake.secondary_limit(retry_after=900)
    for key, value in fake.job_env().items():
        monkeypatch.setenv(key, value)
    proc = gate_in_process("publish", "--post-comment-file", path, "--pr", "12", "--max-wait", "60")
    assert proc.returncode == 4
    err = proc.stderr
    assert "gate: error:" in err and "retry-after 900 s" in err and "not retrying early" in err
    assert len(fake.requests) == 1 and not fake.comments


# -- the CLI, the token, the matrix -------------------------------------------------------
def write_inputs(tmp_path: Path, outcome: Outcome) -> dict[str, Path]:
    paths = {"verdict": tmp_path / "verdict.json", "hunks": tmp_path / "hunks.json",
             "head": tmp_path / "results.json"}
    paths["verdict"].write_text(f.headline_verdict(outcome).model_dump_json())
    paths["hunks"].write_text(f.annotated_hunks().model_dump_json())
    paths["head"].write_text(f.results_json(f.sweep_results("head", f.REGRESSED)))
    return paths


def test_token_never_printed_nor_written(fake, tmp_path, monkeypatch):
    env = {**fake.job_env(), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "GITHUB_OUTPUT": str(tmp_path / "output.txt"), "GATE_PR_NUMBER": "12"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    printed = []
    for outcome in (Outcome.PASS, Outcome.FAIL):
        p = write_inputs(tmp_path, outcome)
        proc = gate_in_process("publish", "--verdict", p["verdict"], "--head", p["head"],
                               "--hunks", p["hunks"], "--comment-file", tmp_path / "c.json")
        assert proc.returncode == outcome.exit_code
        printed.append(proc.stdout + proc.stderr)
    fake.fail_next(403, times=1, message="Resource not accessible by integration", method="PATCH")
    proc = gate_in_process("publish", "--verdict", p["verdict"], "--comment-file", tmp_path / "c.json")
    printed.append(proc.stdout + proc.stderr)
    assert repr(Settings.from_env()).count(TOKEN) == 0
    assert all(TOKEN not in text for text in printed)
    assert (tmp_path / "c.json").exists()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
    assert all(TOKEN not in json.dumps(c) for c in fake.comments.get(12, []))
    assert any(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fake.requests)


def big_hunks(n: int, lines: int = 60) -> HunkSet:
    return f.hunkset([f.hunk(f"vllm/v1/sample/m{i}.py",
                             "\n".join(f"+line {j} of {i}" for j in range(lines)))
                      for i in range(n)])


def test_matrix_runs_merge_under_one_marker_within_the_limit(fake, clock, tmp_path, monkeypatch):
    """Each runner's comment file (as the action writes it) combined into one comment: the
    worst verdict first, each runner's report under its label, fitted by whole hunks."""
    files = []
    for runner, outcome in (("a100", Outcome.PASS), ("h100", Outcome.FAIL)):
        folder = tmp_path / f"perf-gate-results-{runner}"
        folder.mkdir()
        run = CommentRun(verdict=f.verdict(outcome, headline=f"report of {runner}"),
                         head=f.sweep_results("head", f.REGRESSED), hunks=big_hunks(300))
        files.append(f.comment_file(folder, [run]))
    for key, value in {**fake.job_env(), "GATE_PR_NUMBER": "12"}.items():
        monkeypatch.setenv(key, value)
    proc = gate_in_process("publish", "--marker-id", "matrix", "--combine", files[0],
                           "--combine", files[1], "--label", "a100", "--label", "h100")
    assert proc.returncode == 1, proc.stderr
    (comment,) = fake.comments[12]
    body = comment["body"]
    assert len(body) <= MAX_COMMENT_CHARS
    assert body.startswith(f"{marker('matrix')}\n{outcome_tag(Outcome.FAIL)}\n")
    assert body.split("\n")[2].startswith("### ❌ FAIL: report of h100 (worst of 2: h100)")
    assert "### a100" in body and "### h100" in body
    assert body.count("of 300 hunk(s) were left out") == 2  # each runner got its share
    assert "m0.py" in body.split("### h100")[1]
    shown = markdown_check.render(body)
    assert set(shown.tags) <= markdown_check.OWN_TAGS


# -- the marker id is the poster's workflow's (issue 16, item 7) ---------------------------
@pytest.mark.parametrize("value", ["default\n", "a100\nx", "a" * 65, "matrix ", "ab/c"])
def test_a_marker_id_must_be_the_whole_string(value, tmp_path):
    with pytest.raises(GateError, match="marker id"):
        Settings.from_env({"GATE_MARKER_ID": value})
    path = tmp_path / "gate-comment.json"
    data = json.loads(f.comment_file(tmp_path).read_text())
    path.write_text(json.dumps({**data, "marker_id": value}))
    with pytest.raises(GateError, match="invalid comment file"):
        load_comment_file(path)
    data["runs"][0]["label"] = value
    path.write_text(json.dumps(data))
    with pytest.raises(GateError, match="invalid comment file"):
        load_comment_file(path)


def test_the_poster_refuses_a_file_for_another_marker(fake, clock, tmp_path):
    """The hand-over came from a run of PR code: it may not choose which sticky comment (of
    this bot, under another marker) the poster edits."""
    fake.add_comment(12, f.sticky_body(Outcome.PASS, "matrix"), login=GITHUB_ACTIONS)
    path = tmp_path / "gate-comment.json"
    data = json.loads(f.comment_file(tmp_path).read_text())
    path.write_text(json.dumps({**data, "marker_id": "matrix"}))
    with pytest.raises(GateError, match="is for the comment 'matrix', not this workflow's "
                                        "'default'"):
        post_comment_file(settings_for(fake, tmp_path), path, client_factory=factory(clock))
    assert not fake.requests_to("PATCH") and not fake.requests_to("POST")
    assert fake.comments[12][0]["body"] == f.sticky_body(Outcome.PASS, "matrix")
    # the workflow that owns that marker posts it
    post_comment_file(settings_for(fake, tmp_path, marker_id="matrix"), path,
                      client_factory=factory(clock), err=io.StringIO())
    assert fake.comments[12][0]["body"].startswith(marker("matrix") + "\n")


def test_the_poster_command_takes_the_marker_from_its_flag(fake, tmp_path, monkeypatch, capsys):
    path = f.comment_file(tmp_path)  # marker "default"
    for key, value in {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": fake.repository,
                       "GITHUB_API_URL": fake.url}.items():
        monkeypatch.setenv(key, value)
    proc = gate_in_process("publish", "--post-comment-file", str(path), "--pr", "12",
                           "--marker-id", "matrix")
    assert proc.returncode == 2 and "refusing to post" in proc.stderr
    assert not fake.comments.get(12)
