"""Demo data for sqlflow: the ad and user-event scenario of the README, as Delta tables.

- `scenario`: the numbers (sizes, mixes, dirty-row rates, lateness) in one place;
- `noise`: deterministic hash-based randomness as Spark columns;
- `ods`, `dims`: the source tables as DataFrames;
- ready markers of dimension partitions: `sqlflow.runtime.delta.markers` (runtime plumbing);
- `generate`: writes them all; `run`: the `sqlflow demo` commands.
"""
