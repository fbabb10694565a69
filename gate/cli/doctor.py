"""`gate doctor`: check the runner (and a running server) before measuring; print each finding
with its fix. --strict exits 4 (error) when a finding invalidates a measurement."""

from __future__ import annotations

from pathlib import Path

from gate.core.errors import GateError
from gate.core.files import write_atomic
from gate.core.settings import Settings
from gate.plan.runner_pin import label
from gate.runner import doctor
from gate.runner.doctor import DoctorReport, Severity
from gate.runner.fingerprint import ServedFacts
from gate.runner.probes import CGROUP, CPU_SYS, PROC

ORDER = (Severity.invalidating, Severity.warning, Severity.info)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "doctor", help="check the runner (CPU quota vs threads, GPUs, governor, swap, ...)",
        description="Check the runner before measuring and print findings, each with its fix. "
                    "Given --server-pid, also read what a running vLLM server's processes use.")
    p.add_argument("--server-pid", type=int, metavar="PID",
                   help="a running server (its leader, e.g. VllmServer.proc.pid): its process "
                        "tree's affinity, quota, threads and vLLM's log lines are checked")
    p.add_argument("--server-log", type=Path, metavar="PATH",
                   help="the server's log (default: the file its stdout goes to)")
    p.add_argument("--python", help="the server's interpreter, probed for torch's threads "
                                    "(default: this one)")
    p.add_argument("--model-dir", type=Path, help="folder whose disk holds the model and "
                                                   "caches (default: the gate's cache)")
    p.add_argument("--min-free-gib", type=float, default=10.0,
                   help="warn below this much free disk (default: 10)")
    p.add_argument("--sample-s", type=float, default=1.0,
                   help="seconds to watch the server's threads for busy ones (0: skip)")
    p.add_argument("--no-probe", action="store_true",
                   help="do not start the interpreter to read torch's threads")
    p.add_argument("--strict", action="store_true",
                   help="exit 4 when a finding invalidates a measurement")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", type=Path, help="also write the JSON report to this file")
    for flag, default in (("--proc-root", PROC), ("--cgroup-root", CGROUP),
                          ("--cpu-root", CPU_SYS)):
        p.add_argument(flag, type=Path, default=default, help=f"(tests) default {default}")
    p.set_defaults(handler=handle)


def handle(args, settings: Settings) -> int:
    if args.sample_s < 0 or args.min_free_gib < 0:
        raise GateError("--sample-s and --min-free-gib must not be negative")
    if args.server_log is not None and not args.server_log.is_file():
        raise GateError(f"server log {args.server_log} does not exist")
    report = doctor.examine(doctor.Examination(
        server_pid=args.server_pid, server_log=args.server_log, python=args.python,
        model_dir=args.model_dir or settings.cache_dir, min_free_gib=args.min_free_gib,
        sample_s=args.sample_s, probe_torch=not args.no_probe,
        roots=doctor.Roots(args.proc_root, args.cgroup_root, args.cpu_root)))
    if args.out:
        write_atomic(args.out, report.model_dump_json(indent=2))
    print(report.model_dump_json(indent=2) if args.json else render(report))
    return report.exit_code(args.strict)


def render(report: DoctorReport) -> str:
    lines = []
    for severity in ORDER:
        for f in (f for f in report.findings if f.severity is severity):
            lines.append(f"[{f.severity.value}] {f.id}: {f.title}")
            lines += [f"    {line}" for line in f.detail.splitlines()]
            if f.fix:
                lines.append(f"    fix: {f.fix}")
    if report.served is not None:
        lines.append(f"served: {served_line(report.served)}")
    if report.vllm_origin is not None:
        lines.append(f"vllm: {report.vllm_origin.path} (hot-path digest "
                     f"{report.vllm_origin.watched_digest})")
    bad = len(report.invalidating)
    lines.append(f"gate doctor: {bad} invalidating finding(s)" if bad
                 else "gate doctor: nothing invalidates a measurement")
    return "\n".join(lines)


def served_line(served: ServedFacts) -> str:
    """'V1 model runner; torch pool 1 (VLLM::EngineCore ...)'."""
    threads = ("torch pool unknown" if served.torch_threads is None else
               f"torch pool {served.torch_threads} ({served.torch_threads_source})")
    return f"{label(served.model_runner)}; {threads}"
