{#--
  dim_join: join a daily dimension with fallback to the newest READY partition (docs/design.md §2.3).

      select e.event_id, u.vip_level, u.dt as user_dt
      from {{ ref('stg_user_events') }} as e
      {{ dim_join('left', source('dim', 'dim_user'), 'u', 'e', keys=['user_id'],
                  fact_date='to_date(e.event_ts)', partition_column='dt', max_fallback=1) }}

  For a fact row of date d, the chosen partition p* is the newest partition p of the
  dimension with a `commit` row in the commit log (`sqlflow.commit_log`: `sqlflow mark-ready`,
  a synced `_SUCCESS` marker, or a sqlflow write) such that d - max_fallback <= p <= d. The
  row joins the dimension rows of p* only, and `<alias>.<partition_column>` is p* (select it:
  it is the lineage column). Without a ready partition, a left join pads the row; an inner
  join drops it here and sqlflow writes it to the model's quarantine table with reason
  `dim_missing`.

  Arguments:
    join_type         'inner' or 'left'
    dim               the dimension: a source() or ref() value
    alias             its alias in the model
    fact_alias        the alias of the fact table (the FROM of the model)
    keys              equality keys: ['col', ...] (same name on both sides) and/or
                      [['fact_col', 'dim_col'], ...]; a fact side with a `.` or `(` is an
                      expression used as written, e.g. [['cast(e.slot as bigint)', 'ad_id']]
    fact_date         SQL expression of the fact's date d, e.g. 'to_date(e.event_ts)'
    partition_column  the dimension's date partition column ('YYYY-MM-DD' strings or DATE)
    max_fallback      how many days before d may still be used (0: only d itself)

  The result is plain SQL over the dimension and the commit log; sqlflow recognises it by
  its `__sqlflow_dim_day` column and pins one snapshot of both per micro-batch or backfill.
  Under `dbt run` of a `streaming_table`, READY is read from the model's pinned view of the
  commit log instead, and an inner join leaves a `sqlflow_dim_missing` comment saying what it
  joined, from which the materialization writes the `dim_missing` rows
  (macros/materializations/streaming_table_dim_missing.sql). docs/macros.md has the details.
--#}
{% macro dim_join(join_type, dim, alias, fact_alias, keys, fact_date, partition_column='dt',
                  max_fallback=0) -%}
  {%- set how = join_type | lower if join_type is string else '' -%}
  {%- if how not in ['inner', 'left'] -%}
    {% do exceptions.raise_compiler_error(
      "dim_join: unknown join_type `" ~ join_type ~ "`; valid choices: 'inner', 'left'") %}
  {%- endif -%}
  {%- if dim is not defined or dim is none or dim is string -%}
    {% do exceptions.raise_compiler_error(
      "dim_join: `dim` must be a source() or ref() value, e.g. source('dim', 'dim_user') (got: "
      ~ (dim if dim is defined else 'nothing') ~ ")") %}
  {%- endif -%}
  {%- for name, value in [('alias', alias), ('fact_alias', fact_alias), ('fact_date', fact_date),
                          ('partition_column', partition_column)] -%}
    {%- if value is not defined or value is not string or not value | trim -%}
      {% do exceptions.raise_compiler_error(
        "dim_join: `" ~ name ~ "` must be a non-empty string (got: "
        ~ (value if value is defined else 'nothing') ~ ")") %}
    {%- endif -%}
  {%- endfor -%}
  {%- if max_fallback is not number or max_fallback is boolean or max_fallback < 0
         or max_fallback != max_fallback | int -%}
    {% do exceptions.raise_compiler_error(
      "dim_join: `max_fallback` must be a whole number of days >= 0, e.g. 1 (got: "
      ~ max_fallback ~ ")") %}
  {%- endif -%}
  {%- set pairs = interval_join_keys(keys) -%}
  {%- set name = (dim | string | replace('`', '') | lower) -%}
{%- set dbt_run = sqlflow_dim_join_in_dbt_run() -%}
{%- set ready = sqlflow_ready_view() if dbt_run else 'sqlflow.commit_log' -%}
{%- if dbt_run and how == 'inner' %}
/* sqlflow_dim_missing {{ tojson({'dim': name, 'fact_alias': fact_alias, 'fact_date': fact_date,
                                  'partition_column': partition_column,
                                  'max_fallback': max_fallback | int}) | replace('*/', '*\\/') }} */
{%- endif %}
{{ how }} join (
    select __sqlflow_days.__sqlflow_day as __sqlflow_dim_day, __sqlflow_dim.*
    from {{ dim }} as __sqlflow_dim
    join {{ sqlflow_dim_days(name, partition_column, max_fallback, ready) }} as __sqlflow_days
      on __sqlflow_dim.{{ partition_column }} = __sqlflow_days.__sqlflow_p
) as {{ alias }}
  on {{ alias }}.__sqlflow_dim_day = to_date({{ fact_date }})
{%- for l, r in pairs %}
 and {{ l if ('(' in l or '.' in l) else fact_alias ~ '.' ~ l }} = {{ alias }}.{{ r }}
{%- endfor %}
{%- if dbt_run %}
/* sqlflow_dim_join_end */
{%- endif %}
{%- endmacro %}


{% macro sqlflow_dim_days(name, partition_column, max_fallback, ready) -%}
  {#-- Per day, the newest READY partition p* within `max_fallback` days before it (columns
       `__sqlflow_day`, `__sqlflow_p`): each ready p serves the days p .. p + max_fallback.
       `ready` is the commit log, or a pinned view of it. --#}
(
        select __sqlflow_day, max(__sqlflow_p) as __sqlflow_p
        from (
            select __sqlflow_p,
                   explode(sequence(to_date(__sqlflow_p),
                                    date_add(to_date(__sqlflow_p), {{ max_fallback | int }}))) as __sqlflow_day
            from (
                select distinct regexp_extract(`partition`, '(^|/){{ partition_column }}=([^/]*)', 2) as __sqlflow_p
                from {{ ready }}
                where `table` = '{{ name }}' and kind = 'commit'
            ) as __sqlflow_ready
        ) as __sqlflow_spans
        group by __sqlflow_day
    )
{%- endmacro %}


{% macro sqlflow_dim_join_in_dbt_run() %}
  {#-- True while `dbt run`/`build`/`retry` builds a `streaming_table`: its materialization pins
       the commit log and writes the dim_missing rows. sqlflow's own renderer has no `flags`
       (it pins and quarantines in its runtime), nor do `dbt compile` and `dbt show` run a
       materialization: they render the plain commit log. --#}
  {%- if not execute or flags is not defined or flags.WHICH not in ('run', 'build', 'retry') -%}
    {% do return(false) %}
  {%- endif -%}
  {% do return(config is defined and config.get('materialized') == 'streaming_table') %}
{% endmacro %}
