"""The Delta plumbing every runtime shares (docs/design.md §3, "The runtime"): `sinks` (every
write), `deltalog` (a table's own log, read without a Spark job), `commitlog` (§2.5), `once`
(the exactly-once journal), `compaction`, `markers` (`_SUCCESS` ready markers)."""
