{#--
  `streaming_table`: sqlflow's event-time, append-only, partitioned model kind, as `dbt run`
  builds it. It is the batch backfill of docs/design.md §1: a partitioned Delta table whose
  later runs overwrite only the partitions the model's query produces (dynamic partition
  overwrite), so re-running a model for a day replaces that day and nothing else, and never
  duplicates rows. `--full-refresh` replaces the whole table.

  Config:
    partition_by   column or list of columns (required)
    file_format    'delta' (the default and the only choice: the overwrite relies on Delta)
    replace_where  optional SQL predicate on the partition columns, e.g.
                   "dt between '{{ var('start') }}' and '{{ var('end') }}'": every partition
                   matching it is replaced, also those the query no longer produces rows for,
                   and Delta rejects the write if a row falls outside it.

  Rows of event sources that are late, future or have no valid event time go to
  `<model>__quarantine` instead of the table, by sqlflow's rule (streaming_table_quarantine.sql).
  So do the fact rows of an inner `dim_join` with no ready dimension partition, reason
  `dim_missing` (streaming_table_dim_missing.sql).
--#}
{% materialization streaming_table, adapter='spark', supported_languages=['sql'] -%}
  {#-- Validate first, so a misconfigured model runs no SQL at all --#}
  {%- set file_format = sqlflow_validate_file_format(config.get('file_format', default='delta')) -%}
  {%- set partition_by = sqlflow_validate_partition_by(config.get('partition_by')) -%}
  {%- set replace_where = config.get('replace_where') -%}
  {%- set grant_config = config.get('grants') -%}

  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_relation(this) -%}
  {#-- a temporary view has neither database nor schema in Spark --#}
  {%- set tmp_relation = this.incorporate(path={"identifier": this.identifier ~ '__dbt_tmp'})
                             .include(database=false, schema=false) -%}
  {%- set full_refresh = should_full_refresh() -%}

  {{ run_hooks(pre_hooks) }}

  {#-- Late, future and malformed input rows, and the fact rows an inner dim_join finds no
       ready dimension partition for, to <model>__quarantine; the query reads the clean views
       and the pinned commit log (streaming_table_quarantine.sql, _dim_missing.sql) --#}
  {%- set clean_views = sqlflow_prepare_quarantine(target_relation, compiled_code) -%}

  {%- if existing_relation is none or full_refresh or not existing_relation.is_delta -%}
    {#-- CREATE OR REPLACE keeps a Delta table readable (and its history) while it is
         rebuilt; anything else in the way (a view, a parquet table) must go first --#}
    {%- if existing_relation is not none and not existing_relation.is_delta -%}
      {% do adapter.drop_relation(existing_relation) %}
    {%- endif -%}
    {%- call statement('main') -%}
      {{ sqlflow_create_partitioned_delta(target_relation, compiled_code, partition_by) }}
    {%- endcall -%}
  {%- else -%}
    {% do sqlflow_check_partitioning(existing_relation, partition_by) %}
    {%- call statement('create_tmp_relation') -%}
      {{ create_temporary_view(tmp_relation, compiled_code) }}
    {%- endcall -%}
    {% do sqlflow_overwrite_partitions(tmp_relation, target_relation, replace_where) %}
  {%- endif -%}

  {% do sqlflow_drop_clean_views(clean_views) %}

  {% set should_revoke = should_revoke(existing_relation, full_refresh_mode=full_refresh) %}
  {% do apply_grants(target_relation, grant_config, should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
