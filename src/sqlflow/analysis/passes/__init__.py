"""The analysis passes: one concern per module, each a pure function of the sqlglot tree
and the scope facts of `scopes.py`, assembled into a `ModelIR` by `sqlflow.analysis.analyze`."""
