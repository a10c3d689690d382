"""One real Kafka broker for the whole test run (`sqlflow.engine.broker`), no mock of Kafka.

It starts on a free port with its state in a per-run temp folder, at the first test that asks
for it, and stops when the run ends.
"""

from __future__ import annotations

import socket

import pytest


def _free_port() -> int:
    # the controller listens on port + 1: look for two free ports in a row
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """The test run's broker (a `Broker`: `.address`, `.folder`)."""
    from sqlflow.engine import broker

    folder = tmp_path_factory.mktemp("kafka")
    started = broker.start(folder, _free_port())
    yield started
    broker.stop(folder)
