import pytest

from cluster.demo_runs import local_launch, local_run  # noqa: F401  (session fixtures: one reference run)

LAUNCHES = ("local_launch", "standalone_launch", "connect_launch")


@pytest.fixture(scope="session", autouse=True)
def launch_early(request):
    """At the first test of this folder, start together what the collected tests need of the
    local reference run, the standalone cluster and the Connect server: each test then waits
    only for what it uses, and the JVMs start while the others work (README, "Tests")."""
    needed = {name for item in request.session.items for name in item.fixturenames}
    for name in LAUNCHES:
        if name in needed:
            request.getfixturevalue(name)
