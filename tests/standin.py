"""A stand-in for a DataFrame in JVM-free tests of what a running query holds
(`sqlflow.runtime.incremental.held`, `sqlflow.runtime.incremental.copies`): a frame is the list
of its rows' names, a union concatenates them."""

from __future__ import annotations


class Frame(list):
    """A stand-in DataFrame: its rows; `coalesce`, `persist`, `localCheckpoint` and
    `unpersist` are recorded."""

    dropped = persisted = counted = checkpointed = False
    partitions: int | None = None
    compact: Frame | None = None  # the copy `coalesce` made of it

    def unionByName(self, other):
        return Frame([*self, *other])

    def coalesce(self, n):
        self.compact = Frame(self)
        self.compact.partitions = n
        return self.compact

    def persist(self):
        self.persisted = True
        return self

    def localCheckpoint(self, eager=True):
        self.checkpointed = not eager  # only lazy checkpoints are taken (`held._merge`)
        return self

    def unpersist(self):
        self.dropped = True
        return self

    def count(self):
        self.counted = True
        return len(self)
