"""Delta debugging over hunks (gate.evidence.ddmin): the result reproduces, is 1-minimal, and
the tests it needs stay few when one hunk is to blame."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from gate.evidence.ddmin import ddmin, split


class Oracle:
    """reproduces(config) when `config` holds every hunk of `needed`; counts distinct tests."""

    def __init__(self, needed: set[int], unresolved: set[tuple[int, ...]] = frozenset()):
        self.needed, self.unresolved = needed, unresolved
        self.tested: list[tuple[int, ...]] = []

    def __call__(self, config: tuple[int, ...]) -> bool:
        if config not in self.tested:
            self.tested.append(config)
        if config in self.unresolved:
            return False
        return self.needed <= set(config)


def is_one_minimal(result: tuple[int, ...], oracle: Oracle) -> bool:
    return oracle(result) and not any(
        oracle(tuple(x for x in result if x != drop)) for drop in result)


def test_split_keeps_order_and_sizes():
    assert split((1, 2, 3, 4, 5), 2) == [(1, 2, 3), (4, 5)]
    assert split((1, 2, 3), 3) == [(1,), (2,), (3,)]
    assert split((1, 2), 4) == [(1,), (2,)]


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_one_slow_hunk_is_found_wherever_it_is(n):
    for culprit in range(n):
        oracle = Oracle({culprit})
        assert ddmin(range(n), oracle) == (culprit,)
        # a single culprit costs about two tests per halving
        assert len(oracle.tested) <= 2 * math.ceil(math.log2(max(n, 2))) + 1


def test_five_hunks_one_slow_takes_few_tests():
    oracle = Oracle({3})
    assert ddmin(range(5), oracle) == (3,)
    assert len(oracle.tested) <= 5


def test_two_hunks_that_are_slow_only_together_are_both_kept():
    oracle = Oracle({1, 6})
    result = ddmin(range(8), oracle)
    assert set(result) == {1, 6} and is_one_minimal(result, oracle)


def test_random_targets_give_a_one_minimal_set():
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 12)
        needed = set(rng.sample(range(n), rng.randint(1, min(3, n))))
        oracle = Oracle(needed)
        result = ddmin(range(n), oracle)
        assert set(result) == needed, (n, needed, result)


def test_an_unresolved_configuration_counts_as_not_reproducing():
    # the half holding the culprit does not apply alone: ddmin goes on with smaller chunks
    oracle = Oracle({2}, unresolved={(0, 1, 2)})
    result = ddmin(range(6), oracle)
    assert result == (2,) and (0, 1, 2) in oracle.tested


def test_the_given_order_decides_which_hunks_are_tested_together_first():
    oracle = Oracle({4})
    ddmin([4, 0, 1, 2, 3], oracle)
    assert oracle.tested[0] == (4, 0, 1)


def test_every_subset_tested_is_a_subset_of_the_input():
    oracle = Oracle({0, 5})
    ddmin(range(7), oracle)
    universe = set(range(7))
    assert all(set(c) <= universe and c for c in oracle.tested)
    assert len(oracle.tested) < len(list(itertools.chain.from_iterable(
        itertools.combinations(range(7), k) for k in range(1, 8))))
