{#-- Helpers of the `streaming_table` materialization (streaming_table.sql). --#}

{% macro sqlflow_validate_file_format(raw_file_format) %}
  {%- set accepted = ['delta'] -%}
  {%- if raw_file_format not in accepted -%}
    {% do exceptions.raise_compiler_error(
      "Invalid file_format for materialized='streaming_table': " ~ raw_file_format ~ "\n"
      ~ "Expected one of: " ~ accepted | join(', ')
      ~ " (the partition-scoped overwrite needs Delta); remove file_format or set it to 'delta'") %}
  {%- endif -%}
  {% do return(raw_file_format) %}
{% endmacro %}


{% macro sqlflow_validate_partition_by(raw_partition_by) %}
  {#-- Returns the partition columns as a list; a streaming table without them would be
       overwritten whole on every run, which is exactly what it must never do. --#}
  {%- set cols = [raw_partition_by] if raw_partition_by is string else raw_partition_by -%}
  {%- if not cols or cols is not sequence or cols is mapping
         or cols | reject('string') | list or '' in cols -%}
    {% do exceptions.raise_compiler_error(
      "materialized='streaming_table' requires partition_by: a column or a list of columns "
      ~ "of the model's output, e.g. partition_by=['dt', 'hour'] (got: " ~ raw_partition_by ~ "). "
      ~ "Runs overwrite only the partitions the query produces, so a table without partitions "
      ~ "cannot be a streaming_table; use materialized='table' for that") %}
  {%- endif -%}
  {% do return(cols) %}
{% endmacro %}


{% macro sqlflow_create_partitioned_delta(relation, sql, partition_by) %}
  {#-- Not dbt-spark's create_table_as: it writes `using` only when file_format is set
       explicitly, and a streaming_table is Delta by default. --#}
  create or replace table {{ relation }}
  using delta
  {{ options_clause() }}
  {{ sqlflow_tblproperties('sink') }}
  partitioned by ({{ partition_by | join(', ') }})
  {{ location_clause() }}
  {{ comment_clause() }}
  as
  {{ sql }}
{% endmacro %}


{% macro sqlflow_tblproperties(role) %}
  {#-- The config's tblproperties plus the owner sqlflow checks before it replaces a table
       (docs/semantics.md, "Table ownership"), so sqlflow and dbt may rebuild each other's. --#}
  {%- set props = dict(config.get('tblproperties') or {}) -%}
  {%- do props.update({'sqlflow.model': model.name, 'sqlflow.role': role}) -%}
  tblproperties (
    {%- for key, value in props.items() -%}
      '{{ key }}' = '{{ value }}'{{ ", " if not loop.last }}
    {%- endfor -%}
  )
{% endmacro %}


{% macro sqlflow_check_partitioning(relation, partition_by) %}
  {#-- An overwrite into a table partitioned differently from the config would replace the
       table's partitions, not the configured ones: make the user rebuild it instead. --#}
  {#-- dbt hands container values of a result over as JSON text --#}
  {%- set detail = run_query('describe detail ' ~ relation) -%}
  {%- set actual = fromjson(detail.columns['partitionColumns'].values()[0]) -%}
  {%- if actual | map('lower') | list != partition_by | map('lower') | list -%}
    {% do exceptions.raise_compiler_error(
      "streaming_table " ~ relation ~ " is partitioned by [" ~ actual | join(', ')
      ~ "] but the model's partition_by is [" ~ partition_by | join(', ') ~ "]; "
      ~ "run `dbt run --full-refresh --select " ~ model.name ~ "` to rebuild it") %}
  {%- endif -%}
{% endmacro %}


{% macro sqlflow_overwrite_partitions(source, target, replace_where) %}
  {#-- Columns by name from the table, so a reordered SELECT lands in the right columns. --#}
  {%- set cols = adapter.get_columns_in_relation(target) | map(attribute='quoted') | join(', ') -%}
  {%- if replace_where -%}
    {#-- Delta's REPLACE WHERE: every row matching the predicate is replaced, and Delta
         fails the write if the query produces a row outside it. --#}
    {%- call statement('main') -%}
      insert into table {{ target }} replace where {{ replace_where }}
      select {{ cols }} from {{ source }}
    {%- endcall -%}
  {%- else -%}
    {#-- Dynamic partition overwrite replaces exactly the partitions the query writes.
         In `static` mode the same statement would truncate the whole table, so the mode is
         set for this statement and the session's own value put back after it: with the
         session method dbt shares its SparkSession with sqlflow. --#}
    {%- set previous = run_query('set spark.sql.sources.partitionOverwriteMode').columns['value'].values()[0] -%}
    {%- call statement('set_dynamic_overwrite') -%}
      set spark.sql.sources.partitionOverwriteMode = dynamic
    {%- endcall -%}
    {%- call statement('main') -%}
      insert overwrite table {{ target }}
      select {{ cols }} from {{ source }}
    {%- endcall -%}
    {%- call statement('restore_overwrite_mode') -%}
      set spark.sql.sources.partitionOverwriteMode = {{ previous }}
    {%- endcall -%}
  {%- endif -%}
{% endmacro %}
