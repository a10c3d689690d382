"""What sqlflow cannot do through Spark Connect (pyspark 4.2), said before any work starts.

A Connect client has no JVM and no SparkContext: it sends plans to the server and gets rows
back. A batch run works over Connect: the Delta log reader asks Spark when it has no JVM
(docs/design.md §3, `runtime/delta/deltalog.py`) and the UDFs are pickled to the server. So
does an `available-now` stream run of `incremental` and `stateful` models, of routed groups
and of the Kafka sources' archive queries: the server runs each micro-batch in a Python worker
of its own, with a picklable function that rebuilds what it needs there
(`runtime/incremental/remote.py`, `routing.RemoteRouteBatch`, `kafka.archive.Append`), and
this process reads the progress from the query, the commit log and the archive's Delta
versions. A routed group's `_SUCCESS` markers are created by the server
(`markers.touch`: `copyFromLocalToFs`). An interval trigger
(the stream service) runs over Connect too: this process supervises each query through its
`StreamingQuery` handle (restarts, `sqlflow ctl pause`/`resume`, SIGTERM) and builds its
progress and metrics from the query's progress and the commit log once a batch committed
(`runtime/service.py`). With `idle_timeout`, the idle step of an `incremental` outer join of two
streams, which locally shares a lock with the batches, runs with the model's query stopped
(stop, pad, start again from the checkpoint, only when the step would pad:
`runtime/incremental/remote_idle.py`), and a `stateful` model's idle watch, which only appends
a heartbeat to an input, runs beside the query; both read when the inputs last brought rows
from the query's offset log (`runtime/input_activity.py`). What still cannot run
(docs/deploy.md, "Spark Connect"):

- `sqlflow ctl rate`: it holds the next micro-batch from the callback each batch's report
  reaches in this process, which over Connect is never called while the query runs;
- Kafka sources of one alignment group: the `Aligner` that holds their queries against each
  other lives in one process, and over Connect each query's batches run in a worker of their own;
- `sqlflow demo generate`: it deletes stale ready markers and lists them, which a Connect
  client cannot do (it can only have the server create a file).

The client encodes each expression as nested protobuf messages it can decode only about 50
calls deep, so sqlflow builds its own expressions flat (`runtime/delta/partition_path.py`);
should a model's still be too deep, `nesting_error` says so instead of a traceback.
"""

from __future__ import annotations

from sqlflow.errors import SqlflowError
from sqlflow.project.profiles import Target

# what cannot run over Connect -> why (the sentence after "because")
LIMITS = {
    "rate": "`sqlflow ctl rate` holds a model's next micro-batch from the callback each batch's "
            "report reaches in this process; over Connect the server's Python worker runs the "
            "batches and that callback is never called while the query runs (cap the read per "
            "batch with the input's `max_files_per_trigger` instead)",
    "nesting": "the model's query builds a Spark expression nested deeper than the Connect "
               "client's protobuf decoder accepts (`DecodeError` parsing 'spark.connect.Expression': "
               "about 50 nested calls, pyspark 4.2)",
    "generate": "the demo generator deletes stale ready markers and lists them through the "
                "driver's Hadoop FileSystem; a Connect client can only have the server create a "
                "file (`copyFromLocalToFs`), neither delete nor list one",
    "kafka": "the archive queries of one Kafka alignment group are held against each other by "
             "one object in this process, while over Connect each query's micro-batches run in "
             "a Python worker of the server's own; archive the group's sources without "
             "`alignment_group` over Connect, or in one process",
}

ALTERNATIVE = ("run sqlflow as the Spark driver instead: the `cluster` target (a standalone, YARN "
               "or Kubernetes master, see docs/deploy.md), or `local`")


def refuse_over_connect(target: Target | None, what: str) -> None:
    """Raise the reason and the alternative when `target` is a Spark Connect target and `what`
    (a key of LIMITS) cannot run over it; do nothing otherwise.

    >>> from sqlflow.project.profiles import Target
    >>> t = Target(name="connect", type="spark", method="session", schema="dw",
    ...            server_side_parameters={"spark.remote": "sc://h:15002"})
    >>> refuse_over_connect(t, "generate")
    Traceback (most recent call last):
    ...
    sqlflow.errors.SqlflowError: error: `generate` cannot run over Spark Connect (target `connect`): ...
    """
    if target is not None and target.is_connect and what in LIMITS:
        raise connect_error(target.name, what)


def connect_error(target_name: str, what: str) -> SqlflowError:
    """The error for `what` (a key of LIMITS) over the Connect target `target_name`."""
    return SqlflowError(f"`{what}` cannot run over Spark Connect (target `{target_name}`): {LIMITS[what]}",
                        hint=ALTERNATIVE)


def nesting_error(exc: BaseException) -> SqlflowError | None:
    """The Connect client's protobuf `DecodeError` on a deeply nested expression, as the
    limit it is (reason and alternative), instead of a traceback; None for anything else."""
    kind = type(exc)
    if kind.__name__ == "DecodeError" and kind.__module__.startswith("google.protobuf"):
        return SqlflowError(f"a model cannot run over Spark Connect: {LIMITS['nesting']}",
                            hint=ALTERNATIVE)
    return None


# Spark 4.2 waits 10 s, hard-coded, for a foreachBatch worker (PythonWorkerFactory.createSimpleWorker)
SLOW_WORKER = "Python worker failed to connect back"


def worker_error(exc: BaseException) -> SqlflowError | None:
    """A stream query the Connect server could not start because its `foreachBatch` Python
    worker did not connect back in time, as one line with the fix; None for anything else.

    >>> worker_error(RuntimeError("x: Python worker failed to connect back.")).diagnostics[0].hint[:41]
    "make the server's Python workers start fa"
    >>> worker_error(ValueError("other")) is None
    True
    """
    if SLOW_WORKER not in str(exc):
        return None
    return SqlflowError(
        "a stream query could not start over Spark Connect: the server's Python worker for its "
        "micro-batches did not connect back within 10 s (hard-coded in Spark 4.2)",
        hint="make the server's Python workers start faster: point the server's PYSPARK_PYTHON "
             "at an interpreter that imports the installed pyspark, not Spark's pyspark.zip "
             "(docs/deploy.md, \"Spark Connect\"), or run again when the server is less busy")
