"""`sqlflow verify` (docs/design.md §2): a model's stream plan, fed its input in random orders
and splits, must end with exactly its batch plan's output. `run` drives it, `outputs` says what
each plan kind writes and runs, `compare` compares two tables per output partition."""
