"""The `incremental` stream strategy (docs/design.md §2.9): one query per model whose
`foreachBatch` runs the delta-rule SQL (`stream`, `microbatch`), older rows read from the
input tables (`older`) or copied to state tables (`state`), outer-join padding (`padding`)."""
