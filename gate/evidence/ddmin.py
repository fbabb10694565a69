"""Delta debugging (Zeller and Hildebrandt's ddmin) over a change's hunks: the smallest set
of hunks that, applied alone onto the parent build, still reproduces the slowdown
(docs/bisect.md#the-smallest-set-of-hunks). Pure: `reproduces` does the measuring.

ddmin keeps a failing configuration and splits it into n chunks: a chunk that reproduces
becomes the configuration (n = 2); else the complement of a chunk that reproduces does
(n - 1); else n doubles until every chunk is one hunk, when the configuration is 1-minimal:
leaving out any single hunk of it loses the slowdown. A test that cannot tell (inconclusive,
a set of hunks that does not apply or import) counts as "does not reproduce", as ddmin's
"unresolved". The given order is kept, so the hunks ranked first by the profile evidence
are tested together first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Config = tuple[int, ...]


def split(config: Config, n: int) -> list[Config]:
    """`config` in `n` contiguous chunks of near-equal size (the larger ones first)."""
    size, extra = divmod(len(config), n)
    chunks, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        chunks.append(config[start:end])
        start = end
    return [c for c in chunks if c]


def ddmin(elements: Sequence[int], reproduces: Callable[[Config], bool]) -> Config:
    """A 1-minimal subset of `elements` that reproduces; `elements` as a whole is taken to
    reproduce (test it first) and the empty set not to."""
    config, n = tuple(elements), 2
    while len(config) >= 2:
        reduced = _reduce(config, n, reproduces)
        if reduced is not None:
            config, n = reduced
        elif n < len(config):
            n = min(len(config), 2 * n)
        else:
            break
    return config


def _reduce(config: Config, n: int, reproduces: Callable[[Config], bool]
            ) -> tuple[Config, int] | None:
    chunks = split(config, n)
    for chunk in chunks:
        if reproduces(chunk):
            return chunk, 2
    if len(chunks) > 2:  # with two chunks each complement is the other chunk, tested above
        for chunk in chunks:
            complement = tuple(e for e in config if e not in chunk)
            if reproduces(complement):
                return complement, max(n - 1, 2)
    return None
