"""Analysis passes over one parsed model: one concern per module, each a pure function of the
sqlglot tree (and the scope facts of `scopes.py`), assembled into a `ModelIR` by `analyze.py`."""
