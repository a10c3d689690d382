"""What a command does when it combines compile and runtime: `check`, `diff` (with
`changes`), `lineage`, `verify/`, `run` (the one place a run prints) and `dbt_bridge`."""
