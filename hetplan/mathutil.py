"""Small numeric helpers shared across layers (no hetplan imports).

Source: Hamilton's largest-remainder method; the floor of one slot per share is hetplan's choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def apportion(shares: Sequence[float], total: int, *, at_least_one: bool = True) -> list[int]:
    """Split ``total`` into integers in proportion to ``shares`` by largest remainder: each gets the floor of
    its exact share, and the units left go to the largest fractional parts (ties: the lower index).

    ``at_least_one`` (routing weights, slots): every share gets at least 1, ``total`` is raised to the number of
    shares, zero total weight counts as 1 (so all get 1 and the rest goes round-robin by index), and units
    the minimum adds are taken back from the shares most above their exact value (ties: the higher index).
    Without it (counts that may be 0, e.g. requests per length class): a zero or negative ``total`` or total
    weight gives all zeros.
    """
    n = len(shares)
    if n == 0:
        return []
    if at_least_one:
        total = max(total, n)
        weight = sum(shares) or 1.0
    else:
        weight = sum(shares)
        if total <= 0 or weight <= 0:
            return [0] * n
    exact = [total * x / weight for x in shares]
    floors = [math.floor(e) for e in exact]
    slots = [max(1, f) for f in floors] if at_least_one else list(floors)
    order = sorted(range(n), key=lambda k: (-(exact[k] - floors[k]), k))
    k = 0
    while sum(slots) < total:
        slots[order[k % n]] += 1
        k += 1
    while sum(slots) > total:
        big = max(range(n), key=lambda m: (slots[m] - exact[m], m))
        if slots[big] <= 1:
            break
        slots[big] -= 1
    return slots


__all__ = ["apportion"]
