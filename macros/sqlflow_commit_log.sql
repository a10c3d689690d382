{#--
  sqlflow_commit_log: a post-hook that appends `write` rows to the commit log
  (`sqlflow.commit_log`, docs/design.md §2.5) after `dbt run` builds a model, so schedulers, `sqlflow
  status` and dimension readiness see dbt writes like sqlflow's own:

      models:
        sqlflow_demo:
          dwd:
            +post-hook: "{{ sqlflow_commit_log() }}"

  One row per partition of the table as it is after the run (its `partition_by` columns, in
  order: `dt=2026-11-01/hour=03`), with its row count, mode `dbt`, the model name and dbt's
  invocation id as `run_id`; one row with partition '' for an unpartitioned table. The log is
  created if it does not exist, with the schema of `sqlflow.runtime.delta.commitlog.SCHEMA`.
--#}
{% macro sqlflow_commit_log() -%}
  {%- if execute -%}
    {% do run_query("create schema if not exists sqlflow") %}
    {% do run_query(sqlflow_commit_log_ddl()) %}
  {%- endif -%}
  {%- set parts = config.get('partition_by') or [] -%}
  {%- set parts = [parts] if parts is string else parts -%}
  {%- if parts | length > 0 -%}
    {%- set spec -%}
      concat_ws('/', {% for c in parts %}concat('{{ c }}=', coalesce(cast({{ c }} as string), '')){{ ", " if not loop.last }}{% endfor %})
    {%- endset -%}
  {%- else -%}
    {%- set spec = "''" -%}
  {%- endif %}
insert into sqlflow.commit_log
select '{{ this | string | replace('`', '') | lower }}', {{ spec }}, 'write', 'dbt', '{{ model.name }}',
       '{{ invocation_id }}', cast(null as bigint), cast(null as string), cast(null as string),
       count(*), cast(null as bigint), cast(null as bigint), cast(null as bigint), false,
       'dbt run', current_timestamp()
from {{ this }}
{%- if parts | length > 0 %}
group by {{ parts | join(', ') }}
{%- endif %}
{%- endmacro %}


{% macro sqlflow_commit_log_ddl() -%}
create table if not exists sqlflow.commit_log (
  `table` string not null, `partition` string not null, `kind` string not null,
  `mode` string not null, `model` string, `run_id` string, `batch_id` bigint,
  `inputs` string, `dim_partitions` string, `rows` bigint, `late` bigint,
  `quarantined` bigint, `dropped` bigint, `provisional` boolean not null,
  `reason` string, `committed_at` timestamp not null
) using delta
{%- endmacro %}
