"""The seam matrix's covering set (matrix.py): every pair of values that can meet is in a cell,
no cell is one that cannot mean anything, and the set is the same at every run."""

from __future__ import annotations

import itertools

import matrix


def test_every_pair_that_can_meet_is_in_a_cell_and_every_cell_is_allowed():
    cells = matrix.pairwise()
    assert all(matrix.allowed(c) for c in cells)
    possible = [dict(zip(matrix.FACTORS, v)) for v in itertools.product(*matrix.FACTORS.values())]
    wanted = set().union(*(matrix.pairs(c) for c in possible if matrix.allowed(c)))
    covered = set().union(*(matrix.pairs(c) for c in cells))
    assert wanted == covered
    # every value of every factor is used, and a pair no allowed cell holds is never asked for
    for factor, values in matrix.FACTORS.items():
        assert {c[factor] for c in cells} == set(values)
    assert ((("entry", "smoke"), ("follow_up", "hang_short")) not in wanted)


def test_the_set_is_far_smaller_than_the_product_and_the_same_every_time():
    cells = matrix.pairwise()
    product = len(list(itertools.product(*matrix.FACTORS.values())))
    assert len(cells) < product / 3 and cells == matrix.CELLS == matrix.pairwise()
    assert len({matrix.name(c) for c in cells}) == len(cells)


def test_a_small_example_is_covered_pairwise():
    factors = {"a": (1, 2, 3), "b": ("x", "y"), "c": (True, False)}
    cells = matrix.pairwise(factors, allowed=lambda c: True, cost=lambda c: 0)
    pairs = {(p, q) for c in cells for p, q in itertools.combinations(c.items(), 2)}
    for (fa, va), (fb, vb) in itertools.combinations([(f, v) for f, vs in factors.items() for v in vs], 2):
        if fa != fb:
            assert ((fa, va), (fb, vb)) in pairs
    assert len(cells) <= 7  # 3 x 2 is the least any covering set can be; greedy is allowed a little more
