"""`sqlflow demo` over Kafka, README command 1 (docs/semantics.md, "Kafka sources"): the product
as it is meant to be used, end to end on this machine.

1. a broker: the one already answering at the target's bootstrap servers (used, left running),
   else the project's own started as `sqlflow kafka up` starts it (and stopped at the end);
2. a fresh start: the demo's topics are deleted, and the target's tables and checkpoints the
   demo writes are dropped, so every run shows the same thing (the `kafka` target has its own
   warehouse and metastore: the Delta-only tables of the `local` target are not touched);
3. `sqlflow demo produce`: the demo's events into their topics, malformed records included;
4. `sqlflow --target kafka run --mode stream --trigger available-now`: the topics archived,
   then every model streamed, a progress line per micro-batch;
5. the backfill and the comparison: `sqlflow audit` over every streaming model and routed
   group, the batch plan run over exactly the input each stream read and compared with the
   live tables, every partition (the stream has ended at the end of its input); its table is
   printed, and the demo fails (exit 1) when a table differs.
"""

from __future__ import annotations

import shutil
import time

from rich.console import Console
from rich.markup import escape

from sqlflow.demo import scenario as S
from sqlflow.demo.produce import TOPICS
from sqlflow.engine import broker
from sqlflow.engine.context import Context
from sqlflow.errors import SqlflowError
from sqlflow.planning.plan import COMMIT_LOG, Plan, RoutedPlan, StreamPlan
from sqlflow.project.kafka import BOOTSTRAP_KEY, bootstrap_servers
from sqlflow.project.load import load_project
from sqlflow.project.runmode import AVAILABLE_NOW
from sqlflow.runtime.kafka.archive import archive_table, bound_sources, checkpoint_of
from sqlflow.runtime.query import checkpoint_dir
from sqlflow.secrets import is_secret

KAFKA_TARGET = "kafka"  # the demo profile's target binding the sources to topics (profiles/profiles.yml)
LOCAL_HOSTS = ("127.0.0.1", "localhost")


def kafka_context(ctx: Context) -> Context | None:
    """The Context `sqlflow demo` runs over Kafka with: `ctx` when its target names a Kafka
    cluster; without `--target`, the profile's `kafka` target when it has one; else None (an
    explicit target without a cluster, `--target local` or `cluster`: the Delta-only demo)."""
    if bootstrap_servers(ctx.target.server_side_parameters):
        return ctx
    if ctx.target_name is not None:
        return None
    kafka = Context(project_dir=ctx.project_dir, target_name=KAFKA_TARGET)
    try:
        return kafka if bootstrap_servers(kafka.target.server_side_parameters) else None
    except SqlflowError:  # the profile has no `kafka` target
        return None


def run_kafka_demo(ctx: Context, console: Console, *, rows: int | None = None,
                   seed: int | None = None, days: int | None = None) -> bool:
    """Steps 1-5 of the module docstring; True when every streamed table equals the backfill."""
    from sqlflow.demo.produce import produce
    from sqlflow.report.audit import outputs_table
    from sqlflow.workflows.audit import audit_project
    from sqlflow.workflows.run import plans_for_run, run_stream_plans

    began = time.monotonic()
    say = _say(console)
    servers = bootstrap_servers(ctx.target.server_side_parameters)
    assert servers is not None  # kafka_context chose this target for it
    started = ensure_broker(ctx, servers, say)
    try:
        plans = plans_for_run(ctx, "stream", console)
        start_over(ctx, plans, servers, say)
        rows = S.KAFKA_ROWS if rows is None else rows
        seed = S.DEFAULT_SEED if seed is None else seed
        days = S.DEFAULT_DAYS if days is None else days
        console.print(f"[bold]Producing demo events[/bold] (sqlflow --target {ctx.target.name} demo "
                      f"produce): {rows:,} ad impressions over {days} day(s), seed {seed}")
        produce(ctx.spark, servers, rows=rows, seed=seed, days=days, progress=say)
        console.print(f"[bold]Streaming every model[/bold] (sqlflow --target {ctx.target.name} run "
                      "--mode stream --trigger available-now): the topics are archived, then each "
                      "model reads its input, one line per micro-batch")
        streamed = run_stream_plans(ctx, plans, console, trigger=AVAILABLE_NOW)
        failed = [r.model for r in streamed if r.state == "failed"]
        if failed:
            raise SqlflowError(f"the stream run of {', '.join(failed)} failed (see above)",
                               hint="fix it and run `sqlflow demo` again")
        console.print(f"[bold]Backfilling and comparing[/bold] (sqlflow --target {ctx.target.name} "
                      "audit): each streaming model's batch plan over exactly the input its stream "
                      "read, against the live tables, every partition")
        reports = audit_project(ctx, every_partition=True, progress=say)
        console.print(outputs_table(reports, title="every streamed table against the backfill"))
        equal = all(r.ok for r in reports)
        seconds = time.monotonic() - began
        if equal:
            console.print(f"[green]every streamed table equals the backfill[/green]: {len(reports)} "
                          f"streaming models and routed groups, sinks, routed targets and "
                          f"quarantines (demo finished in {seconds:.0f}s)")
        else:
            bad = ", ".join(r.model for r in reports if not r.ok)
            console.print(f"[red]DIFFERS[/red]: {escape(bad)} (see `sqlflow --target "
                          f"{ctx.target.name} audit`; demo finished in {seconds:.0f}s)")
        return equal
    finally:
        if started is not None:
            broker.stop(started.folder)
            say(f"kafka broker at {started.address} stopped (the demo started it)")


def _say(console: Console):
    return lambda line: console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)


def ensure_broker(ctx: Context, servers: str, say) -> broker.Broker | None:
    """Use the broker answering at `servers` (None: the demo leaves it running), else start the
    project's own on the target's local port and return it (the demo stops it at the end)."""
    addresses = [a.strip() for a in servers.split(",") if a.strip()]
    secret = any(is_secret(n) for n in ctx.target.env_sourced.get(BOOTSTRAP_KEY, ()))
    shown = "the target's bootstrap servers" if secret else servers
    if any(broker.reachable(a) for a in addresses):
        say(f"kafka broker at {shown} already running: using it (left running at the end)")
        return None
    host, _, port = addresses[0].rpartition(":") if len(addresses) == 1 else ("", "", "")
    if host not in LOCAL_HOSTS or not port.isdigit():
        raise SqlflowError(f"no Kafka broker answers at {shown} (target `{ctx.target.name}`), and "
                           "the demo starts one only on this machine (127.0.0.1:<port>)",
                           hint=f"start that cluster, or unset SQLFLOW_KAFKA_BOOTSTRAP "
                                f"(`{BOOTSTRAP_KEY}` in profiles/profiles.yml)")
    folder = ctx.state_dir / "kafka"
    other = broker.running(folder)
    if other is not None and other.port != int(port):
        raise SqlflowError(f"the project's broker runs at {other.address}, the target points at "
                           f"{addresses[0]}",
                           hint=f"run with SQLFLOW_KAFKA_BOOTSTRAP={other.address}, or stop it "
                                "with `sqlflow kafka down`")
    say(f"starting a kafka broker at {host}:{port} (as `sqlflow kafka up`; state in {folder})")
    return broker.start(folder, int(port))


def start_over(ctx: Context, plans: list[Plan], servers: str, say) -> None:
    """Step 2 of the module docstring: the demo's topics, and the target's tables and
    checkpoints the demo writes (its sources' archives, dimensions and models), are removed."""
    spark = ctx.spark
    topics = [topic for topic, _, _ in TOPICS.values()]
    gone = delete_topics(servers, topics)
    sources = bound_sources(load_project(ctx.project_dir).sources.values(), plans)
    schemas = {archive_table(t).split(".")[0] for t in sources} | {COMMIT_LOG.split(".")[0]}
    for plan in plans:
        schemas |= {b.relation.split(".")[0] for b in plan.sources if "." in b.relation}
        schemas |= {table.split(".")[0] for table in (*(t for t, _ in plan.outputs), plan.quarantine)
                    if "." in table}
    for schema in sorted(schemas):
        spark.sql(f"DROP DATABASE IF EXISTS `{schema}` CASCADE")
    folders = [checkpoint_of(ctx.project_dir, t) for t in sources]
    folders += [checkpoint_dir(ctx.project_dir, p) for p in plans if isinstance(p, StreamPlan | RoutedPlan)]
    there = [folder for folder in folders if folder.exists()]
    for folder in there:
        shutil.rmtree(folder)
    say(f"starting over: topics deleted: {', '.join(gone) or 'none yet'}; schemas "
        f"{', '.join(sorted(schemas))} of target `{ctx.target.name}` dropped; checkpoints "
        f"removed: {len(there)}")


def delete_topics(servers: str, topics: list[str], wait_s: float = 60.0) -> list[str]:
    """Delete those of `topics` the cluster has and wait until it no longer lists them (a
    deleted topic cannot be created again before); returns the ones deleted."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        there = [t for t in topics if t in set(admin.list_topics())]
        if there:
            admin.delete_topics(there)
        deadline = time.monotonic() + wait_s
        while there and set(there) & set(admin.list_topics()):
            if time.monotonic() > deadline:
                raise SqlflowError(f"the topics {', '.join(there)} were not deleted within {wait_s:.0f}s",
                                   hint="run `sqlflow demo` again in a moment")
            time.sleep(0.5)
        return there
    finally:
        admin.close()
