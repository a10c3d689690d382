"""One real Kafka broker for the whole test run (`sqlflow.engine.broker`), no mock of Kafka.

It starts on a free port with its state in a per-run temp folder, at the first test that asks
for it, and stops when the run ends.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """The test run's broker (a `Broker`: `.address`, `.folder`)."""
    from sqlflow.engine import broker

    folder = tmp_path_factory.mktemp("kafka")
    started = broker.start(folder, broker.free_port())
    yield started
    broker.stop(folder)
