"""The one largest-remainder apportionment, in both of its behaviours (emitters and Hetis)."""

import pytest

from hetplan.mathutil import apportion


@pytest.mark.parametrize(
    ("shares", "total", "expected"),
    [
        ([1.0, 1.0, 1.0], 100, [34, 33, 33]),  # equal remainders: the lower index first
        ([0.5, 0.3, 0.2], 10, [5, 3, 2]),
        ([0.01, 0.99], 10, [1, 9]),  # at least one each: taken back from the share most above its exact value
        ([0.0, 0.0], 5, [3, 2]),  # no weight: all get 1, the rest round-robin by index
        ([1.0, 2.0, 3.0], 2, [1, 1, 1]),  # the total is raised to the number of shares
        ([], 4, []),
    ],
)
def test_at_least_one_each(shares, total, expected):
    assert apportion(shares, total) == expected
    assert sum(expected) == max(total, len(shares)) or not shares


@pytest.mark.parametrize(
    ("shares", "total", "expected"),
    [
        ([1.0, 1.0, 1.0], 100, [34, 33, 33]),
        ([0.01, 0.99], 10, [0, 10]),  # zero is allowed
        ([0.25, 0.25, 0.5], 2, [1, 0, 1]),  # ties: the lower index
        ([0.0, 0.0], 5, [0, 0]),
        ([0.3, 0.7], 0, [0, 0]),
        ([], 4, []),
    ],
)
def test_zero_allowed(shares, total, expected):
    assert apportion(shares, total, at_least_one=False) == expected
