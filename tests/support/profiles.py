"""Hand-made build profiles for the unit tests of gate.profile.diff and friends."""

from __future__ import annotations

from gate.profile.data import (
    BuildProfile,
    FrameInfo,
    FrameTable,
    ProcessInfo,
    SampleWindow,
    StackCount,
)

# A stack is a tuple of "file:name" strings, root first.
Stacks = dict[tuple[str, ...], int]


def frame(spec: str) -> FrameInfo:
    file, name = spec.split(":")
    return FrameInfo(file=file, name=name, line=10)


def make_profile(label: str, windows: list[Stacks], tokens: float | list[float] = 1000.0,
                 rate_hz: int = 100) -> BuildProfile:
    """One process ("Worker"), one window per dict of stack -> sample count."""
    table = FrameTable()
    per_window = tokens if isinstance(tokens, list) else [tokens] * len(windows)
    out = []
    for i, (stacks, n_tokens) in enumerate(zip(windows, per_window, strict=True)):
        counts = [StackCount(process=0, frames=[table.add(frame(f)) for f in stack], count=n)
                  for stack, n in stacks.items() if n > 0]
        out.append(SampleWindow(index=i, start_s=2.0 * i, end_s=2.0 * i + 2, output_tokens=n_tokens,
                          sample_s=1.0 / rate_hz, stacks=counts))
    return BuildProfile(label=label, rate_hz=rate_hz, window_s=2.0,
                        processes=[ProcessInfo(pid=1, role="Worker")], frames=table.frames,
                        windows=out)


MAIN = "app.py:main"
STEP = "app.py:step"
SLOW = "lib/utils.py:apply_grammar_bitmask"
FAST = "lib/utils.py:prepare"


def steady(slow: int, fast: int = 50, idle: int = 100, windows: int = 5) -> list[Stacks]:
    """`windows` identical windows: main -> step -> {slow, fast}, plus main's own time."""
    return [{(MAIN, STEP, SLOW): slow, (MAIN, STEP, FAST): fast, (MAIN,): idle}
            for _ in range(windows)]
