"""Files written under a root folder: fixture trees that stand in for /proc, cgroups and /sys,
and the files of the git repositories the tests build."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, rel: str, content: str | bytes) -> Path:
    """Write `content` at root/rel, creating the folders on the way."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def fake_process(root: Path, pid: int, ppid: int, title: str, cpus: str, threads: int,
                 environ: dict[str, str] | None = None, cgroup: str = "0::/\n",
                 states: str = "S", nspid: tuple[int, ...] = (), fds: tuple[str, ...] = ()
                 ) -> None:
    """/proc/<pid> of a process as the doctor reads it: stat, status (with `nspid`, the PIDs
    of outer namespaces first, like the kernel's NSpid line), cmdline, environ, cgroup, one
    task per letter of `states` (R runnable, S sleeping), and fd/N links to `fds`."""
    name = title.split(" ")[0][:15]
    write(root, f"{pid}/stat", f"{pid} ({name}) S {ppid} {pid} {pid} 0 -1\n")
    ns = "\t".join(str(p) for p in (nspid or (pid,)))
    write(root, f"{pid}/status", f"Name:\t{name}\nThreads:\t{threads}\n"
                                 f"Cpus_allowed_list:\t{cpus}\nNSpid:\t{ns}\n")
    (root / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
    for n, target in enumerate(fds):
        (root / str(pid) / "fd" / str(n)).symlink_to(target)
    write(root, f"{pid}/cmdline", title.replace(" ", "\0").encode() + b"\0")
    env = b"".join(f"{k}={v}".encode() + b"\0" for k, v in (environ or {}).items())
    write(root, f"{pid}/environ", b"\0" * 40 + env)  # setproctitle zeroes the start
    write(root, f"{pid}/cgroup", cgroup)
    for tid, state in enumerate(states):
        write(root, f"{pid}/task/{pid + tid}/stat", f"{pid + tid} (a b) c) {state} {ppid} 0\n")
