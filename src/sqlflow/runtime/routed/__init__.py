"""Routed groups (docs/design.md §2.4, §2.5): one read of the parent writes every target
(`routing`), with file budgets (`filebudget`) and the partition commit (`partition_commit`)."""
