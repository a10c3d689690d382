from cluster.demo_runs import local_run  # noqa: F401  (a session fixture: one reference run)
