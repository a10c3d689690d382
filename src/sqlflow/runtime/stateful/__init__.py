"""The `stateful` stream strategy (docs/design.md §2.9): Spark's own stream-stream operators with
watermarks, the end-of-input flush (§2.6) and dropped-row detection (§2.7)."""
