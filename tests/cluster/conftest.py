import os

import pytest

from cluster.demo_runs import local_launch, local_run  # noqa: F401  (session fixtures: one reference run)

LAUNCHES = ("local_launch", "standalone_launch", "connect_launch")


@pytest.fixture(scope="module", autouse=True)
def launch_early(request):
    """At the first test of a file, start together what the tests need of the local reference
    run, the standalone cluster and the Connect server: each test then waits only for what it
    uses, and the JVMs start while the others work (README, "Tests"). In one process, what
    every collected test needs (the Connect server comes up during the cluster tests); under
    xdist, what this file's tests need: a worker runs whole files, and the other file may be
    the other worker's (tests/conftest.py)."""
    items = request.session.items
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items = [item for item in items if getattr(item, "module", None) is request.module]
    needed = {name for item in items for name in item.fixturenames}
    for name in LAUNCHES:
        if name in needed:
            request.getfixturevalue(name)


def pytest_collection_modifyitems(items):
    """In each file of this folder, the tests that do not compare with the reference run go
    first (a stable sort: otherwise in file order): under xdist the Connect file's worker runs
    them while the other worker's reference run finishes (demo_runs.Reference)."""
    here = [i for i, item in enumerate(items) if item.path.parent.name == "cluster"
            and item.path.parent.parent.name == "tests"]
    ordered = sorted((items[i] for i in here),
                     key=lambda item: (str(item.path), "local_run" in getattr(item, "fixturenames", ())))
    for i, item in zip(here, ordered, strict=True):
        items[i] = item
