"""Differential flame graph of two build profiles.

Two artifacts, both normalised to the same unit (per 1k output tokens) so that builds with
different throughput compare:

- `diff.folded`: Brendan Gregg's differential collapsed-stack format, the output of his
  difffolded.pl, one line per stack, `frame;frame;frame BASE HEAD`, counts in microseconds
  of samples per 1k output tokens. flamegraph.pl (or inferno-flamegraph) renders it directly.
- `diff-flamegraph.svg`: a self-contained SVG drawn here, since no maintained Python renderer
  of differential flame graphs exists on PyPI (flameprof reads cProfile output, difflame diffs
  source lines). Like flamegraph.pl's differential mode: the root is at the bottom, a frame's
  width is the head's inclusive time, its colour the change: red = more time in the head,
  blue = less. The colour follows the frame's own (self) time change, so the frame where the
  time went stands out rather than every caller above it; each frame's tooltip gives base and
  head, self and inclusive.

Every process of a build is one root frame named after its role (APIServer, EngineCore,
Worker), so the graph shows which process spent the time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

from gate.profile.data import BuildProfile

WIDTH = 1200  # px
ROW = 16  # px per stack level
FONT_PX = 11
CHAR_PX = 6.6  # average glyph width of an 11px monospace font
MIN_PX = 0.3  # frames narrower than this are not drawn (flamegraph.pl's --minwidth)
TOP = 48  # px for the title lines


def frame_label(name: str, file: str, line: int) -> str:
    """py-spy's own frame spelling; ';' separates frames in the folded format."""
    where = f"{file}:{line}" if line else file
    return f"{name} ({where})".replace(";", ",")


def folded(profile: BuildProfile, basis: str = "wall") -> dict[str, float]:
    """Collapsed stacks `Role;frame;...` -> ms of samples per 1k output tokens; spin-waits
    (gate.profile.data.WAIT_FRAMES) left out, as in the diff."""
    labels = [frame_label(f.name, f.file, f.line) for f in profile.frames]
    roles = [p.role for p in profile.processes]
    out: dict[str, float] = {}
    per_1k = 1000.0 / profile.output_tokens  # ms -> ms per 1k tokens
    waits = profile.waiting_frames()
    for window in profile.windows:
        weights = window.sample_ms(len(roles), basis)
        for s in window.stacks:
            if waits.intersection(s.frames):
                continue
            key = ";".join([roles[s.process], *(labels[i] for i in s.frames)])
            out[key] = out.get(key, 0.0) + s.count * weights[s.process] * per_1k
    return out


def diff_folded_text(base: dict[str, float], head: dict[str, float]) -> str:
    """difffolded.pl's output: `stack BASE HEAD` per line, in integer microseconds."""
    lines = []
    for stack in sorted(set(base) | set(head)):
        b, h = round(base.get(stack, 0.0) * 1000), round(head.get(stack, 0.0) * 1000)
        if b or h:
            lines.append(f"{stack} {b} {h}")
    return "\n".join(lines) + "\n"


@dataclass
class Node:
    name: str
    base: float = 0.0  # inclusive
    head: float = 0.0
    base_self: float = 0.0
    head_self: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)


def build_tree(base: dict[str, float], head: dict[str, float]) -> Node:
    root = Node("all")
    for side, stacks in (("base", base), ("head", head)):
        for stack, value in stacks.items():
            node = root
            setattr(root, side, getattr(root, side) + value)
            for name in stack.split(";"):
                node = node.children.setdefault(name, Node(name))
                setattr(node, side, getattr(node, side) + value)
            setattr(node, f"{side}_self", getattr(node, f"{side}_self") + value)
    return root


def colour(delta: float, scale: float) -> str:
    """White for no change, towards red (more in the head) or blue (less)."""
    strength = min(abs(delta) / scale, 1.0) if scale > 0 else 0.0
    fade = round(235 - 175 * strength)
    return f"rgb(250,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},250)"


def walk(root: Node) -> Iterator[tuple[Node, int]]:
    """Every node with its level, iteratively: deep stacks cannot hit the recursion limit."""
    todo = [(root, 0)]
    while todo:
        node, level = todo.pop()
        yield node, level
        todo += [(c, level + 1) for c in node.children.values()]


def _frame_svg(node: Node, *, x: float, y: float, w: float, scale: float) -> str:
    d_self, d_incl = node.head_self - node.base_self, node.head - node.base
    tip = (f"{node.name}\nhead {node.head:.1f} / base {node.base:.1f} ms per 1k tokens "
           f"inclusive ({d_incl:+.1f}); self {node.head_self:.1f} / {node.base_self:.1f} "
           f"({d_self:+.1f})")
    parts = [f'<g><title>{escape(tip)}</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" '
             f'height="{ROW - 1}" fill="{colour(d_self, scale)}" rx="2"/>']
    chars = int((w - 4) / CHAR_PX)
    if chars >= 3:
        text = node.name if len(node.name) <= chars else node.name[:chars - 2] + ".."
        parts.append(f'<text x="{x + 2:.2f}" y="{y + ROW - 4}">{escape(text)}</text>')
    return "".join(parts) + "</g>"


def render_svg(base: dict[str, float], head: dict[str, float], title: str) -> str:
    """The differential flame graph as one SVG document (see the module docstring)."""
    root = build_tree(base, head)
    scale = max(abs(n.head_self - n.base_self) for n, _ in walk(root))
    depth = 1 + max(level for _, level in walk(root))
    height = TOP + depth * ROW + 8
    px_per_ms = WIDTH / root.head if root.head > 0 else 0.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="monospace" font-size="{FONT_PX}">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="4" y="16" font-size="14">{escape(title)}</text>',
           '<text x="4" y="34">width: head time per 1k output tokens; colour: change of the '
           "frame's own time, red = more in the head, blue = less</text>"]
    todo = [(root, 0.0, 0)]
    while todo:
        node, x, level = todo.pop()
        w = node.head * px_per_ms
        if w < MIN_PX:
            continue
        out.append(_frame_svg(node, x=x, y=height - 8 - (level + 1) * ROW, w=w, scale=scale))
        child_x = x
        for child in sorted(node.children.values(), key=lambda c: c.name):
            todo.append((child, child_x, level + 1))
            child_x += child.head * px_per_ms
    out.append("</svg>")
    return "\n".join(out) + "\n"
