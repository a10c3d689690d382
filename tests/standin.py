"""A stand-in for a DataFrame in JVM-free tests of what a running query holds
(`sqlflow.runtime.incremental.held`, `sqlflow.runtime.incremental.copies`): a frame is the list
of its rows' names, a union concatenates them."""

from __future__ import annotations

from types import SimpleNamespace


class Frame(list):
    """A stand-in DataFrame: its rows; `coalesce`, `persist`, `localCheckpoint` and
    `unpersist` are recorded, and `run` (a Spark job over it) fills the lazy local checkpoints
    it is computed from, as Spark does."""

    dropped = persisted = counted = checkpointed = filled = False
    partitions: int | None = None
    compact: Frame | None = None  # the copy `coalesce` made of it
    sources: tuple[Frame, ...] = ()  # the frames it is computed from

    def unionByName(self, other):
        union = type(self)([*self, *other])
        union.sources = (self, other)
        return union

    def coalesce(self, n):
        self.compact = type(self)(self)
        self.compact.partitions, self.compact.sources = n, (self,)
        return self.compact

    def run(self):
        """A job reading the frame: a lazy local checkpoint is filled, and read from then on."""
        if self.checkpointed:
            self.filled = True
            return
        for source in self.sources:
            source.run()

    @property
    def _jdf(self):
        """The JVM side, as far as `held` asks it: whether a local checkpoint is filled."""
        rdd = SimpleNamespace(isCheckpointed=lambda: self.filled)
        plan = SimpleNamespace(logical=lambda: SimpleNamespace(rdd=lambda: rdd))
        return SimpleNamespace(queryExecution=lambda: plan)

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
