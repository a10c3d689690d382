"""A small micro-batch's join, or a small backfill, planned without adaptive query execution
and run without code generation (docs/design.md §2.9; §3, "The runtime").

A running `incremental` query reads each held batch of its older rows from its own cached
partition (`held`). Under adaptive execution every cached relation a plan scans is a query
stage of its own (`TableCacheQueryStage`): the plan is re-optimised as the stages complete and
the result stage is planned after them, work that grew with every held batch. At 1,000 new
rows a micro-batch the join and its hand-over to the driver took 0.8-1.1 s at a query's
2nd-4th batch and 1.7-2.9 s at its 14th-17th with it; without it 0.9-1.2 s at the 2nd-10th
and 1.3-2.2 s at the 11th-17th (`bench/microbatch_cost.py --batches 16`, 2026-11-29, README).

What adaptive execution adds is for large inputs (joins switched to broadcasts at run time,
skew split, shuffle partitions coalesced); a small batch's rows (at most `LOCAL_ROWS` new rows,
`microbatch`) are broadcast by their size alone. Without it a shuffle (an aggregation in the
model) would keep `spark.sql.shuffle.partitions` tasks, so the block also caps those at the
cores Spark runs on.

A join that reads few rows in all (at most `INTERPRETED_ROWS`: the new rows, the held rows and
the held version's rows by its file statistics, as the caller counts them) also runs without
code generation. Code generation compiles Java classes for each new plan (a class per whole
stage, a projection per expression list), and a micro-batch's plan is new every time (its prune
bounds are literals in it): its classes were compiled again at each batch, for rows that the
interpreted expressions evaluate in less time. The sink phase of a 1,000-row micro-batch took
0.64-0.79 s without it against 0.84-0.99 s with it (`bench/microbatch_cost.py`, 2026-11-29,
README). Interpreted expressions cost more per row: a 1,000-row join against 200,000 cached
rows took as long either way (0.30-0.37 s once warm, one process, 2026-11-29), against
2,000,000 rows 0.90-1.32 s interpreted and 0.52-0.76 s compiled. A join whose rows read are
not known keeps code generation: every outer join (its padding reads pending rows no count
covers) and a join that reads a state table's copies. Spark tests its code generation against its interpreted
expressions; the rows are the same either way, as with or without adaptive execution.

A backfill (`batch.run_batch`, `routing.run_routed_batch`) whose inputs hold at most
`INTERPRETED_ROWS` rows in all by their Delta logs (`input_rows`) runs inside the block too,
small and interpreted: the demo's whole project at 200 impressions a day took 38-45 s
against 56-69 s as configured, warm, in one process (2026-11-29, README).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from pyspark.sql import SparkSession

from sqlflow.runtime.session_settings import changed

ADAPTIVE = "spark.sql.adaptive.enabled"
SHUFFLE = "spark.sql.shuffle.partitions"
WHOLE_STAGE = "spark.sql.codegen.wholeStage"
FACTORY = "spark.sql.codegen.factoryMode"  # how expressions are evaluated: compiled or interpreted
INTERPRETED = {WHOLE_STAGE: "false", FACTORY: "NO_CODEGEN"}
INTERPRETED_ROWS = 100_000  # rows a join reads at most to run without code generation (half of where
# the two cost the same, below)


def small_plan(spark: SparkSession, small: bool, interpreted: bool = False) -> AbstractContextManager[None]:
    """Plan the queries run inside the block without adaptive execution when `small`, with at
    most one shuffle partition per core, and run them without code generation when
    `interpreted` too; as configured otherwise."""
    if not small:
        return nullcontext()
    settings = {ADAPTIVE: "false", **(INTERPRETED if interpreted else {})}
    cores = _cores(spark)
    shuffle = spark.conf.get(SHUFFLE, None)
    if cores and shuffle and shuffle.isdigit() and int(shuffle) > cores:
        settings[SHUFFLE] = str(cores)
    return changed(spark, settings)


def unadaptive(spark: SparkSession) -> AbstractContextManager[None]:
    """Plan the queries run inside the block without adaptive execution, whatever their size:
    for a global aggregate (no grouping key, no join), to which adaptive execution adds nothing
    (no join strategy to change, no skew, one partition for the final aggregate) but a Spark job
    per query stage and a re-plan after each. A micro-batch's statistics (`MicroBatch._stats`,
    an aggregate per input under a union) ran as five jobs with it and one without: its phase
    took 0.03-0.04 s less a micro-batch (1M rows in 20 micro-batches, rounds with and without
    it alternating in one process, 2026-12-04)."""
    return changed(spark, {ADAPTIVE: "false"})


def _cores(spark: SparkSession) -> int | None:
    """The cores Spark runs tasks on (its default parallelism); None where the session has no
    SparkContext to ask (Spark Connect)."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - a Connect session refuses sparkContext in its own way
        return None
