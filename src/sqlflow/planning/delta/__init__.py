"""The delta rule (docs/design.md §2.9): a model's batch query rewritten to emit only what one
micro-batch adds (`rule`), and where a query reads its streams and whether it is linear in
them (`linear`)."""
