"""Deterministic pseudo-randomness as Spark column expressions.

Every draw is a hash of (seed, salt, key columns), never Spark's `rand()`: `rand()` depends on
how rows are split into partitions, a hash does not, so a seed gives the same table whether it
is generated on two cores or two hundred. A distinct salt per draw keeps draws independent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

_TWO_53 = float(2**53)


def uniform(seed: int, salt: str, *keys: Column) -> Column:
    """A double in [0, 1), a pure function of the seed, the salt and the key columns."""
    h = F.xxhash64(F.lit(seed), F.lit(salt), *keys)
    # The top 53 bits fill a double's mantissa exactly: uniform, and never 1.0.
    return F.shiftrightunsigned(h, 11).cast("double") / F.lit(_TWO_53)


def normal(seed: int, salt: str, *keys: Column) -> Column:
    """A standard normal draw (Box-Muller over two uniforms)."""
    u1 = F.lit(1.0) - uniform(seed, salt + ":1", *keys)  # (0, 1]: log never sees 0
    u2 = uniform(seed, salt + ":2", *keys)
    return F.sqrt(F.lit(-2.0) * F.log(u1)) * F.cos(F.lit(2 * math.pi) * u2)


def index(u: Column, n: int) -> Column:
    """A uniform integer in [0, n) from a uniform u."""
    return F.least(F.floor(u * F.lit(n)), F.lit(n - 1)).cast("int")


def choice(u: Column, values: Sequence) -> Column:
    """One of `values`, each equally likely."""
    return F.element_at(F.array(*[F.lit(v) for v in values]), index(u, len(values)) + 1)


def weighted(u: Column, weights: Mapping | Sequence[float]) -> Column:
    """A key of `weights` (or an index of a weight list) with probability proportional to its weight."""
    items = list(weights.items()) if isinstance(weights, Mapping) else list(enumerate(weights))
    total = float(sum(w for _, w in items))
    expr: Any  # the functions module, then a Column
    expr, acc = F, 0.0  # F.when starts the CASE chain, Column.when extends it
    for value, w in items[:-1]:
        acc += w / total
        expr = expr.when(u < F.lit(acc), F.lit(value))
    last = F.lit(items[-1][0])
    return last if expr is F else expr.otherwise(last)


def zipf_rank(u: Column, n: int) -> Column:
    """A rank in [1, n] with P(k) close to 1/(k ln n): a few hot items, a long tail.

    Inverse transform of the continuous log-uniform law: rank = floor((n + 1) ** u).
    """
    rank = F.floor(F.pow(F.lit(float(n + 1)), u))
    return F.least(F.greatest(rank, F.lit(1)), F.lit(n)).cast("bigint")


def truncated_exponential(u: Column, mean: float, upper: float) -> Column:
    """An exponential draw with the given mean, conditioned to lie in [0, upper)."""
    mass = 1.0 - math.exp(-upper / mean)
    return F.lit(-mean) * F.log(F.lit(1.0) - u * F.lit(mass))
