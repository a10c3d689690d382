"""A dbt project with seeds, an ephemeral chain, a vendored package with a dispatched macro and
its own model, seed and tests, dbt's cross-database macros, built-in, custom generic and
singular data tests: `sqlflow build` and `dbt build` build the same tables, row for row and
type for type, give every test the same name and status, and stop at the same failing test.

One small project, written to tmp, is built twice on the test's SparkSession: by sqlflow
(`sqlflow.workflows.build.build_project`) into schema `t_dp_sf` (seeds: `t_dp_sf_raw`), and by
one real `dbt build` (dbt-spark `session` method) into `t_dp_dbt` (`t_dp_dbt_raw`).
"""

from __future__ import annotations

import io
import os
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from helpers import table_names
from sqlflow.engine.context import Context

pytestmark = [pytest.mark.spark, pytest.mark.dbt]

SF, DBT = "t_dp_sf", "t_dp_dbt"

FILES = {
    "profiles/profiles.yml": f"""\
        shop:
          target: sf
          outputs:
            sf: {{type: spark, method: session, host: NA, schema: {SF}}}
            dbt: {{type: spark, method: session, host: NA, schema: {DBT}}}
        """,
    "dbt_project.yml": """\
        name: shop
        version: '1.0'
        config-version: 2
        profile: shop
        seeds:
          shop:
            +schema: raw
            raw_orders:
              +column_types: {amount: "decimal(10,2)", order_day: date}
            raw_customers:
              +delimiter: ";"
              +quote_columns: true
        models:
          shop:
            +materialized: table
        """,
    "seeds/raw_orders.csv": """\
        id,customer_id,amount,order_day,paid,ordered_at,weight,note
        1,1,10.50,2024-01-03,true,2024-01-03 10:00:00,1.5,first
        2,2,7,2024-02-10,false,2024-02-10 23:59:59,2,second
        3,1,,2024-02-11,,2024-02-11 00:00:01,,third
        4,3,3.25,2024-03-01,true,2024-03-01 12:30:00,0.25,fourth
        """,
    "seeds/raw_customers.csv": """\
        id;name;tier
        1;ann;gold
        2;bob;silver
        3;cy;gold
        """,
    "dbt_packages/minipkg/dbt_project.yml": "name: minipkg\nversion: '1.0'\nconfig-version: 2\n",
    "dbt_packages/minipkg/macros/money.sql": """\
        {% macro cents(col) %}{{ return(adapter.dispatch('cents', 'minipkg')(col)) }}{% endmacro %}
        {% macro default__cents(col) %}cast({{ col }} * 100 as bigint){% endmacro %}
        {% macro shout(col) %}{{ return(adapter.dispatch('shout', 'minipkg')(col)) }}{% endmacro %}
        {% macro default__shout(col) %}lower({{ col }}){% endmacro %}
        {% macro spark__shout(col) %}upper({{ col }}){% endmacro %}
        """,
    # the package's own models, seed, tests: part of the project, as dbt loads them
    "dbt_packages/minipkg/seeds/pkg_ranks.csv": """\
        tier,rank
        gold,1
        silver,2
        """,
    "dbt_packages/minipkg/models/pkg_tiers.sql": """\
        {{ config(materialized='table') }}
        select tier, rank, {{ shout('tier') }} as loud from {{ ref('pkg_ranks') }}
        """,
    "dbt_packages/minipkg/models/pkg.yml": """\
        models:
          - name: pkg_tiers
            columns:
              - name: loud
                data_tests: [not_null, short]
        """,
    "dbt_packages/minipkg/macros/short.sql": """\
        {% test short(model, column_name) %}
        select * from {{ model }} where length({{ column_name }}) > 10
        {% endtest %}
        """,
    "dbt_packages/minipkg/tests/pkg_ranks_positive.sql":
        "select * from {{ ref('pkg_tiers') }} where rank < 1\n",
    "models/tier_ranks.sql": """\
        select c.id, p.rank, p.loud from {{ ref('raw_customers') }} c
        join {{ ref('minipkg', 'pkg_tiers') }} p on c.tier = p.tier
        """,
    # the project overrides the package's default for Spark, as dbt's search order allows
    "macros/money.sql": """\
        {% macro spark__cents(col) %}cast(round({{ col }} * 100) as bigint){% endmacro %}
        """,
    # custom generic tests: a `{% test %}` block in macros/ and one in tests/generic/
    "macros/tests/positive.sql": """\
        {% test positive(model, column_name) %}
        select * from {{ model }} where {{ column_name }} < 0
        {% endtest %}
        """,
    "tests/generic/more_rows_than.sql": """\
        {% test more_rows_than(model, threshold) %}
        select n from (select count(*) as n from {{ model }}) where n <= {{ threshold }}
        {% endtest %}
        """,
    "models/staging/stg_orders.sql": """\
        {{ config(materialized='ephemeral') }}
        select id, customer_id, amount, order_day, paid, ordered_at, weight, note
        from {{ ref('raw_orders') }}
        """,
    "models/staging/enriched_orders.sql": """\
        {{ config(materialized='ephemeral') }}
        with o as (select * from {{ ref('stg_orders') }})
        select o.id, o.amount, o.order_day, o.paid, o.ordered_at, o.weight, o.note,
               c.name as customer_name, c.tier
        from o join {{ ref('raw_customers') }} c on o.customer_id = c.id
        """,
    "models/orders.sql": """\
        select id, customer_name, tier, paid, note,
          {{ minipkg.cents('amount') }} as cents,
          {{ minipkg.shout('customer_name') }} as loud,
          {{ dbt.date_trunc('month', 'order_day') }} as month,
          {{ dbt.dateadd('day', 3, 'order_day') }} as due,
          {{ dbt.dateadd('hour', 2, 'ordered_at') }} as later,
          {{ dbt.datediff('order_day', "cast('2024-03-31' as date)", 'day') }} as age_days,
          {{ dbt.datediff('order_day', "cast('2024-12-31' as date)", 'month') }} as age_months,
          {{ dbt.hash('note') }} as note_hash,
          {{ dbt.safe_cast('weight', dbt.type_string()) }} as weight_text,
          cast(weight as {{ dbt.type_numeric() }}) as weight_num,
          {{ dbt.concat(['customer_name', "'-'", 'id']) }} as label,
          '{{ this.identifier }}' as me
        from {{ ref('enriched_orders') }}
        """,
    "models/customers_monthly.sql": """\
        select tier, {{ dbt.date_trunc('month', 'order_day') }} as month, count(*) as orders,
               sum(amount) as amount
        from {{ ref('enriched_orders') }}
        group by 1, 2
        """,
    "models/tiers.sql": "select tier from {{ ref('raw_customers') }}\n",
    "models/after_tiers.sql": "select distinct tier from {{ ref('tiers') }}\n",
    "models/schema.yml": """\
        models:
          - name: orders
            columns:
              - name: id
                data_tests: [unique, not_null]
              - name: tier
                data_tests:
                  - accepted_values:
                      values: [gold, silver]
              - name: customer_name
                data_tests:
                  - relationships:
                      to: ref('raw_customers')
                      field: name
              - name: cents
                data_tests: [positive]
          - name: customers_monthly
            data_tests:
              - more_rows_than:
                  threshold: 1
              - more_rows_than:
                  threshold: 100
                  config: {severity: warn}
          - name: tiers
            columns:
              - name: tier
                data_tests: [unique]
        seeds:
          - name: raw_customers
            columns:
              - name: id
                data_tests: [unique]
        """,
    "tests/no_negative_cents.sql": "select * from {{ ref('orders') }} where cents < 0\n",
}


def write_project(root: Path) -> Path:
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """Build the project with sqlflow, then with one `dbt build`; both durations are kept."""
    import time

    from sqlflow.workflows.build import build_project

    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    project = write_project(tmp_path_factory.mktemp("dbt_project"))
    for schema in (SF, DBT, f"{SF}_raw", f"{DBT}_raw"):
        spark.sql(f"DROP DATABASE IF EXISTS {schema} CASCADE")
    began = time.monotonic()
    out = io.StringIO()
    report = build_project(Context.with_session(spark, project, "sf"),
                           Console(file=out, width=200), Console(file=out, width=200))
    sf_seconds = time.monotonic() - began

    from dbt.cli.main import dbtRunner

    began = time.monotonic()
    dbt = dbtRunner().invoke([
        "build", "--project-dir", str(project), "--profiles-dir", str(project / "profiles"),
        "--target", "dbt", "--target-path", str(project / "target"),
        "--log-path", str(project / "logs")])
    print(f"sqlflow build {sf_seconds:.1f}s, dbt build {time.monotonic() - began:.1f}s")
    statuses = {r.node.name: str(r.status) for r in (dbt.result or [])}
    assert statuses, dbt.exception
    return report, statuses, out.getvalue()


def rows(spark, table: str) -> tuple[list[tuple[str, str]], Counter]:
    df = spark.table(table)
    cols = sorted(df.dtypes)
    names = [c for c, _ in cols]
    return cols, Counter(tuple(r[c] for c in names) for r in df.select(*names).collect())


def tables(spark, schema: str) -> set[str]:
    if not spark.catalog.databaseExists(schema):
        return set()
    return {t for t in table_names(spark, schema) if not t.startswith("__sqlflow")}


def test_every_table_equals_dbts_row_for_row_and_type_for_type(spark, built):
    for sf, dbt in ((SF, DBT), (f"{SF}_raw", f"{DBT}_raw")):
        assert tables(spark, sf) == tables(spark, dbt), sf
    assert tables(spark, f"{SF}_raw") == {"raw_orders", "raw_customers"}
    assert tables(spark, SF) == {"orders", "customers_monthly", "tiers",  # after_tiers: skipped
                                 "pkg_ranks", "pkg_tiers", "tier_ranks"}  # the package's
    for sf, dbt in ((SF, DBT), (f"{SF}_raw", f"{DBT}_raw")):
        for name in sorted(tables(spark, sf)):
            sf_cols, sf_rows = rows(spark, f"{sf}.{name}")
            dbt_cols, dbt_rows = rows(spark, f"{dbt}.{name}")
            assert sf_cols == dbt_cols, name
            assert sf_rows == dbt_rows, (name, sf_rows - dbt_rows, dbt_rows - sf_rows)
            assert sf_rows, f"{name} is empty: nothing compared"


def test_seed_columns_have_dbts_types(spark, built):
    assert built
    types = dict(spark.table(f"{SF}_raw.raw_orders").dtypes)
    assert types == {"id": "bigint", "customer_id": "bigint", "amount": "decimal(10,2)",
                     "order_day": "date", "paid": "boolean", "ordered_at": "timestamp",
                     "weight": "double", "note": "string"}


def test_a_failing_test_stops_its_descendants_in_both(built):
    report, dbt_status, _ = built
    ours = {name: status for kind, name, status in report.lines}
    assert dbt_status["unique_tiers_tier"] == "fail" and ours["unique_tiers_tier"] == "fail"
    assert dbt_status["after_tiers"] == "skipped" and ours["after_tiers"] == "skip"
    assert report.failed
    passed_by_dbt = sorted(n for n, s in dbt_status.items() if s == "pass")
    passed_by_us = sorted(n for kind, n, s in report.lines if kind == "test" and s == "ok")
    # the built-ins, the custom generic tests (on a column, on the model), the singular one,
    # and the package's (a built-in, its custom one, its singular one)
    assert len(passed_by_dbt) == len(passed_by_us) == 11, (passed_by_dbt, passed_by_us)
    # every test under dbt's name, with dbt's status (a warn-severity failure only warns)
    ours = {n: {"ok": "pass", "skip": "skipped"}.get(s, s) for kind, n, s in report.lines
            if kind == "test"}
    nodes = {rel.split("/")[-1].removesuffix(".sql").removesuffix(".csv") for rel in FILES
             if "models/" in rel or "seeds/" in rel}
    assert ours == {n: s for n, s in dbt_status.items() if n not in nodes}
    assert ours["more_rows_than_customers_monthly_100"] == "warn"
