"""`gate history`: the default branch watched. add a run, show the series, detect change
points, chart a check, write the dashboard, keep the alerts' issues in line, and acknowledge
an intended slowdown (docs/history.md)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

from tabulate import tabulate

from gate.core.errors import EXIT_BAD_INPUT, EXIT_FAIL, EXIT_PASS, GateError
from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.flows import history as flow
from gate.github.alerts import AlertSettings
from gate.history.detect import detect_store
from gate.history.model import Detection, DetectSettings, load_detection, save_detection
from gate.history.store import SOURCES, RunMeta, opened
from gate.judge.verdict import load_verdict, save_verdict
from gate.measure.results import load_results, results_path
from gate.report.pictures import sparkline

DB_HELP = "the history file (SQLite)"


def add_parser(sub) -> None:
    h = sub.add_parser("history", help="the default branch over time: record, detect, alert",
                       description=__doc__.split("\n\n")[0])
    hs = h.add_subparsers(dest="history_command", metavar="ACTION")

    a = hs.add_parser("add", help="record a default-branch run (one entry per commit, plan, "
                      "runner class and check)")
    a.add_argument("results", metavar="RESULTS", help="results.json, or a folder holding one")
    a.add_argument("--db", type=Path, required=True, help=DB_HELP + " (created if missing)")
    a.add_argument("--commit", help="commit measured (default: $GITHUB_SHA, else the vLLM commit)")
    a.add_argument("--commit-time", help="the commit's date (ISO 8601): orders the nights")
    a.add_argument("--branch", help="branch measured (default: $GITHUB_REF_NAME)")
    a.add_argument("--default-branch", default="main")
    a.add_argument("--force-branch", action="store_true", help="record even from another branch")
    a.add_argument("--source", choices=SOURCES, default="nightly")
    a.add_argument("--pr", type=int, help="post-merge: the PR this commit merged")
    a.add_argument("--pr-head", help="post-merge: that PR's head commit (its acknowledgements "
                   "move to the history with this run)")
    a.add_argument("--if-new", action="store_true",
                   help="a commit already recorded is skipped (exit 0), not refused")
    a.set_defaults(handler=handle_add)

    s = hs.add_parser("show", help="the series, or one check night by night")
    s.add_argument("--db", type=Path, required=True, help=DB_HELP)
    s.add_argument("--plan")
    s.add_argument("--check")
    s.add_argument("--runner-class")
    s.add_argument("--all", action="store_true", help="also the checks the plan does not judge")
    s.set_defaults(handler=handle_show)

    d = hs.add_parser("detect", help="change points in every judged check's series")
    d.add_argument("--db", type=Path, required=True, help=DB_HELP)
    d.add_argument("--out", type=Path, help="write changepoints.json here")
    d.add_argument("--plan")
    d.add_argument("--check", action="append", help="only these checks (repeatable)")
    d.add_argument("--repo", type=Path, help="a clone of the measured repository: places an "
                   "acknowledged PR's merge within a change point's range by git ancestry")
    d.add_argument("--alpha", type=float, help=f"largest p value (default {DetectSettings().alpha:g})")
    d.add_argument("--min-persistence", type=int,
                   help=f"nights on the new level (default {DetectSettings().min_persistence})")
    d.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when a regression stands (open, or the latest night)")
    d.set_defaults(handler=handle_detect)

    c = hs.add_parser("chart", help="one check's nights as a PNG, a series per runner class")
    c.add_argument("--db", type=Path, required=True, help=DB_HELP)
    c.add_argument("--check", required=True)
    c.add_argument("--plan")
    c.add_argument("--out", type=Path, required=True, help="the PNG to write")
    c.set_defaults(handler=handle_chart)

    b = hs.add_parser("dashboard", help="one self-contained HTML file of every series")
    b.add_argument("--db", type=Path, required=True, help=DB_HELP)
    b.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    b.add_argument("--detection", type=Path, help="changepoints.json (default: detect now)")
    b.add_argument("--title", default="Structured-output performance on the default branch")
    b.set_defaults(handler=handle_dashboard)

    al = hs.add_parser("alert", help="one issue per change point: open, update, close on "
                       "recovery; dispatch the bisect over a new one's range")
    al.add_argument("--db", type=Path, required=True, help=DB_HELP)
    al.add_argument("--detection", type=Path, required=True, help="changepoints.json")
    al.add_argument("--workflow", default="gate-bisect.yml", help="the bisect workflow's file")
    al.add_argument("--ref", default="main", help="the branch the bisect workflow runs from")
    al.add_argument("--bisect-plan", help="plan the bisect measures (default: the series' plan)")
    al.add_argument("--no-dispatch", action="store_true", help="open issues, start no bisect")
    al.add_argument("--bot-login", help="whose issues are ours (default: the token's identity)")
    al.set_defaults(handler=handle_alert)

    k = hs.add_parser("acknowledge", help="a maintainer acknowledges one check of one PR head "
                      "as an intended slowdown (write access checked through the API)")
    k.add_argument("--db", type=Path, required=True, help=DB_HELP + " (created if missing)")
    k.add_argument("--pr", type=int, required=True)
    k.add_argument("--sha", required=True, help="the PR's head commit (full SHA)")
    k.add_argument("--check", required=True, help="the check's name, e.g. drain.req_per_min")
    k.add_argument("--reason", required=True)
    k.add_argument("--login", required=True, help="who acknowledges (their write access is "
                   "checked)")
    k.set_defaults(handler=handle_acknowledge)

    lm = hs.add_parser("link-merges", help="after merge: each acknowledged PR head that GitHub "
                       "says merged into the default branch marks the commit it became")
    lm.add_argument("--db", type=Path, required=True, help=DB_HELP)
    lm.add_argument("--default-branch", default="main")
    lm.set_defaults(handler=handle_link_merges)

    ls = hs.add_parser("acknowledgements", help="every acknowledgement kept")
    ls.add_argument("--db", type=Path, required=True, help=DB_HELP)
    ls.add_argument("--pr", type=int)
    ls.set_defaults(handler=handle_acknowledgements)

    ap = hs.add_parser("apply-acks", help="a verdict with the acknowledgements of its head "
                       "applied: each acknowledged failing check turns neutral")
    ap.add_argument("verdict", type=Path, metavar="VERDICT")
    ap.add_argument("--db", type=Path, required=True, help=DB_HELP)
    ap.add_argument("--pr", type=int, required=True)
    ap.add_argument("--sha", required=True, help="the head commit the verdict is for")
    ap.add_argument("--out", type=Path, help="where to write it (default: over VERDICT)")
    ap.set_defaults(handler=handle_apply)

    h.set_defaults(handler=lambda args, settings: (h.print_help(), EXIT_BAD_INPUT)[1])


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def handle_add(args, settings: Settings) -> int:
    path = results_path(args.results)
    results = load_results(path)
    commit = args.commit or settings.sha or results.fingerprint.vllm_commit
    if not commit:
        raise GateError("cannot tell which commit was measured: pass --commit")
    if (args.pr is None) != (args.pr_head is None):
        raise GateError("--pr and --pr-head go together")
    meta = RunMeta(commit=commit, branch=args.branch or settings.ref_name or "",
                   source=args.source, commit_time=args.commit_time, results_path=str(path),
                   pr=args.pr, pr_head=args.pr_head)
    with opened(args.db, create=True) as store:
        added = flow.record_run(store, results, meta, default_branch=args.default_branch,
                                force_branch=args.force_branch, if_new=args.if_new)
    if added.run_id is None:
        print(f"gate history: {commit[:12]} is already recorded for {results.plan.name}; "
              "nothing added")
        return EXIT_PASS
    print(f"gate history: recorded {commit[:12]} ({added.entries} checks, plan "
          f"{results.plan.name}) in {args.db}")
    say_linked(added.linked)
    return EXIT_PASS


def say_linked(acks) -> None:
    for a in acks:
        print(f"gate history: PR #{a.pr}'s acknowledgement of {a.check} ({a.login}: {a.reason}) "
              f"now marks {str(a.merged_commit)[:12]}")


def handle_show(args, settings: Settings) -> int:
    with opened(args.db) as store:
        found = [s for s in store.all_series(judged_only=not args.all, plan=args.plan,
                                             checks=[args.check] if args.check else None)
                 if args.runner_class is None or s.runner_class == args.runner_class]
        if not found:
            raise GateError(f"no series in {args.db} match")
        if args.check:
            for s in found:
                print(f"{s.label} ({s.plan}, {s.runner_class})")
                print(tabulate([[i + 1, p.commit[:12], p.at[:19], f"{p.value:.4g}", p.n]
                                for i, p in enumerate(s.points)],
                               headers=["night", "commit", "when", s.unit, "repeats"]))
            return EXIT_PASS
        rows = [[s.plan, s.runner_class, s.check, len(s.points), f"{s.points[-1].value:.4g} "
                 f"{s.unit}", str(sparkline(s.values()[-30:]))] for s in found]
    print(tabulate(rows, headers=["plan", "runner class", "check", "nights", "latest",
                                  "last 30 nights"]))
    return EXIT_PASS


def _settings(args) -> DetectSettings:
    given = {"alpha": getattr(args, "alpha", None),
             "min_persistence": getattr(args, "min_persistence", None)}
    return DetectSettings(**{k: v for k, v in given.items() if v is not None})


def _detect(store, args) -> Detection:
    series = store.all_series(plan=getattr(args, "plan", None),
                              checks=getattr(args, "check", None) or None)
    ancestry = flow.git_ancestry(args.repo) if getattr(args, "repo", None) else None
    return detect_store(series, _settings(args), acknowledgements=store.acknowledgements(),
                        is_ancestor=ancestry)


def handle_detect(args, settings: Settings) -> int:
    with opened(args.db) as store:
        detection = _detect(store, args)
    rows = []
    for sd in detection.series:
        for cp in sd.change_points:
            state = ("acknowledged" if cp.acknowledged else "recovered" if cp.recovered_at
                     else "regression" if cp.regression else "improvement")
            rows.append([sd.plan, sd.runner_class, sd.check, f"{cp.last_good[:12]}.."
                         f"{cp.first_bad[:12]}", f"{cp.change_pct:+.1f}%", f"{cp.p_value:.1e}",
                         cp.persistence, state])
    if rows:
        print(tabulate(rows, headers=["plan", "runner class", "check", "range", "size", "p",
                                      "nights", "state"]))
    else:
        print(f"gate history: no change points in {len(detection.series)} series")
    standing = [sd for sd in detection.series if sd.latest_regressed]
    for sd in standing:
        print(f"regressed: {sd.check} ({sd.plan}, {sd.runner_class}): {sd.why}")
    if args.out:
        save_detection(detection, args.out)
        print(f"wrote {args.out}")
    return EXIT_FAIL if args.fail_on_regression and standing else EXIT_PASS


def handle_chart(args, settings: Settings) -> int:
    from gate.report.history_chart import write_history_png

    with opened(args.db) as store:
        series = store.all_series(judged_only=False, plan=args.plan, checks=[args.check])
        if not series:
            raise GateError(f"no series of check {args.check!r} in {args.db}")
        detection = detect_store(series, acknowledgements=store.acknowledgements())
    plans = {s.plan for s in series}
    if len(plans) > 1:
        raise GateError(f"check {args.check} is in several plans ({', '.join(sorted(plans))}): "
                        "pass --plan")
    note = write_history_png(args.out, series, detection)
    if note:
        raise GateError(note)
    print(f"wrote {args.out}")
    return EXIT_PASS


def handle_dashboard(args, settings: Settings) -> int:
    from gate.report.dashboard import dashboard, render_dashboard

    with opened(args.db) as store:
        series = store.all_series()
        detection = load_detection(args.detection) if args.detection else \
            detect_store(series, acknowledgements=store.acknowledgements())
    if not series:
        raise GateError(f"{args.db} holds no judged series yet")
    html = render_dashboard(dashboard(series, detection, title=args.title))
    write_atomic(args.out, html)
    print(f"wrote {args.out} ({len(series)} series, {len(html):,} bytes)")
    return EXIT_PASS


def _client(settings: Settings):
    from gate.github.client import GitHubClient

    if not settings.repository:
        raise GateError("no repository: set GITHUB_REPOSITORY (owner/name)")
    if settings.github_token is None:
        raise GateError("no token: set GITHUB_TOKEN")
    return GitHubClient(settings.api_url, settings.repository, settings.github_token)


def handle_alert(args, settings: Settings) -> int:
    from gate.github.publish import identify

    detection = load_detection(args.detection)
    client = _client(settings)
    author = identify(client, args.bot_login).login
    alert = AlertSettings(server_url=settings.server_url, workflow=args.workflow, ref=args.ref,
                          bisect_plan=args.bisect_plan, dispatch=not args.no_dispatch)
    with opened(args.db) as store:
        done = flow.alert(store, detection, client=client, author=author, settings=alert)
    print(f"gate history alert: created {done.created or 'none'}, updated "
          f"{done.updated or 'none'}, closed {done.closed or 'none'}, bisect dispatched for "
          f"{done.dispatched or 'none'}")
    for note in done.notes:
        print(f"gate history alert: {note}", file=sys.stderr)
    return EXIT_PASS


def handle_acknowledge(args, settings: Settings) -> int:
    client = _client(settings)
    req = flow.AckRequest(pr=args.pr, head_sha=args.sha, check=args.check, reason=args.reason,
                          login=args.login, created_at=_now())
    with opened(args.db, create=True) as store:
        kept = flow.acknowledge(store, client, req)
    print(f"gate history: {kept.check} of PR #{kept.pr} at {kept.head_sha[:12]} acknowledged "
          f"by {kept.login} ({kept.permission}): {kept.reason}")
    return EXIT_PASS


def handle_link_merges(args, settings: Settings) -> int:
    client = _client(settings)
    with opened(args.db) as store:
        done = flow.link_merges(store, client, default_branch=args.default_branch)
    say_linked(done.linked)
    for note in done.notes:
        print(f"gate history: {note}")
    if not done.linked and not done.notes:
        print("gate history: no acknowledgement waits for its merge")
    return EXIT_PASS


def handle_acknowledgements(args, settings: Settings) -> int:
    with opened(args.db) as store:
        kept = store.acknowledgements(pr=args.pr)
    if not kept:
        print("gate history: no acknowledgements")
        return EXIT_PASS
    print(tabulate([[f"#{a.pr}", a.head_sha[:12], a.check, a.login, a.permission,
                     a.created_at, (a.merged_commit or "")[:12], a.reason] for a in kept],
                   headers=["PR", "head", "check", "by", "access", "when", "merged as",
                            "reason"]))
    return EXIT_PASS


def handle_apply(args, settings: Settings) -> int:
    verdict = load_verdict(args.verdict)
    with opened(args.db) as store:
        applied = flow.acknowledged_verdict(verdict, store, args.pr, args.sha)
    out = args.out or args.verdict
    save_verdict(applied, out)
    used = [c for c in applied.checks if c.acknowledged]
    print(f"gate history: {len(used)} acknowledged check(s); {applied.outcome.value} -> {out}")
    return applied.exit_code
