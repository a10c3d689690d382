{#--
  Quarantine under `dbt run` (docs/design.md §2.1), the same rule and the same table as
  `sqlflow run --mode batch` (src/sqlflow/runtime/quarantine.py):

  | reason            | when (first match wins)                                        |
  |-------------------|----------------------------------------------------------------|
  | `null_event_time` | the event-time column is NULL                                  |
  | `malformed`       | the event time is not NULL but does not parse as a timestamp   |
  | `late`            | event_time < ingest_time - allowed_lateness (microseconds)     |
  | `future`          | event_time > ingest_time + future_tolerance (microseconds)     |

  How: in a `streaming_table` model run by `dbt run`/`build`/`retry`, `source()` of an event
  source (one whose yml declares `meta: sqlflow: event_time: ...`) renders to a temporary view
  of the source's CLEAN rows,
  `<model>__sqlflow_clean__<schema>__<table>`; the materialization creates those views and
  writes every rejected row to `<model>__quarantine` before it runs the model's query. Other
  materializations, and `sqlflow`'s own renderer, get the plain relation.

  A model that reads another `streaming_table` model gets an (empty) quarantine table too, as
  sqlflow writes one: its input rows were already checked by the same rule upstream.
--#}

{% macro source(source_name, table_name) %}
  {%- set relation = builtins.source(source_name, table_name) -%}
  {%- if execute and sqlflow_runs_materializations() and sqlflow_in_streaming_table()
         and sqlflow_event_semantics(source_name, table_name) -%}
    {% do return(sqlflow_clean_view(relation)) %}
  {%- endif -%}
  {% do return(relation) %}
{% endmacro %}


{% macro sqlflow_runs_materializations() %}
  {#-- The clean views exist only while a materialization runs: `dbt compile` and `dbt show`
       render the plain relation, so their SQL runs on its own (and equals sqlflow's). --#}
  {% do return(flags.WHICH in ('run', 'build', 'retry')) %}
{% endmacro %}


{% macro sqlflow_in_streaming_table() %}
  {%- set materialized = config.get('materialized') if config is defined else none -%}
  {% do return(materialized == 'streaming_table') %}
{% endmacro %}


{% macro sqlflow_event_semantics(source_name, table_name) %}
  {#-- The source's `meta.sqlflow` block when it declares an event time, else none. --#}
  {%- for node in graph.sources.values() -%}
    {%- if node.source_name == source_name and node.name == table_name -%}
      {%- set meta = (node.config.meta if node.config is defined and node.config.meta else none)
                     or node.meta or {} -%}
      {%- set semantics = meta.get('sqlflow') or {} -%}
      {%- if semantics.get('event_time') -%}
        {% do return(semantics) %}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {% do return(none) %}
{% endmacro %}


{% macro sqlflow_clean_view(relation) %}
  {#-- One view per model and input, so models running in parallel threads never share one. --#}
  {%- set name = model.name ~ '__sqlflow_clean__' ~ relation.schema ~ '__' ~ relation.identifier -%}
  {% do return(api.Relation.create(identifier=name, type='view').include(database=false, schema=false)) %}
{% endmacro %}


{% macro sqlflow_duration_us(value, what) %}
  {#-- '10 minutes', '30 s', '500 ms', '1.5 hours' as microseconds, like sqlflow's parse_duration. --#}
  {%- set units = {'us': 1, 'microsecond': 1, 'microseconds': 1,
                   'ms': 1000, 'millisecond': 1000, 'milliseconds': 1000,
                   's': 1000000, 'sec': 1000000, 'secs': 1000000, 'second': 1000000, 'seconds': 1000000,
                   'm': 60000000, 'min': 60000000, 'mins': 60000000, 'minute': 60000000, 'minutes': 60000000,
                   'h': 3600000000, 'hr': 3600000000, 'hrs': 3600000000, 'hour': 3600000000, 'hours': 3600000000,
                   'd': 86400000000, 'day': 86400000000, 'days': 86400000000,
                   'w': 604800000000, 'week': 604800000000, 'weeks': 604800000000} -%}
  {%- if value is none -%}
    {% do return(0) %}
  {%- endif -%}
  {%- set found = modules.re.match('(?i)^\\s*(?:interval\\s+)?(\\d+(?:\\.\\d+)?)\\s*([a-z]+)\\s*$', value | string) -%}
  {%- if not found or found.group(2) | lower not in units -%}
    {% do exceptions.raise_compiler_error(
      "source semantics of model " ~ model.name ~ ": `" ~ what ~ "` is `" ~ value
      ~ "`, not a duration; write it like '10 minutes' or '30 seconds' in the source's yml") %}
  {%- endif -%}
  {% do return((found.group(1) | float * units[found.group(2) | lower]) | int) %}
{% endmacro %}


{% macro sqlflow_quarantine_inputs() %}
  {#-- Every event source this model reads: the relation, its clean view and its rule. --#}
  {%- set inputs = [] -%}
  {%- set seen = [] -%}
  {%- for pair in model.sources -%}
    {%- set semantics = sqlflow_event_semantics(pair[0], pair[1]) -%}
    {#-- a source read twice is one input: its rows are quarantined once --#}
    {%- if semantics and (pair[0] ~ '.' ~ pair[1]) not in seen -%}
      {%- do seen.append(pair[0] ~ '.' ~ pair[1]) -%}
      {%- set relation = builtins.source(pair[0], pair[1]) -%}
      {%- do inputs.append({
            'relation': relation,
            'view': sqlflow_clean_view(relation),
            'event_time': semantics['event_time'],
            'ingest_time': semantics.get('ingest_time'),
            'lateness_us': sqlflow_duration_us(semantics.get('allowed_lateness'), 'allowed_lateness'),
            'tolerance_us': sqlflow_duration_us(semantics.get('future_tolerance'), 'future_tolerance')}) -%}
    {%- endif -%}
  {%- endfor -%}
  {% do return(inputs) %}
{% endmacro %}


{% macro sqlflow_reads_streaming_model() %}
  {%- for node_id in model.depends_on.nodes if node_id.startswith('model.') -%}
    {%- set node = graph.nodes.get(node_id) -%}
    {%- if node and node.config.materialized == 'streaming_table' -%}
      {% do return(true) %}
    {%- endif -%}
  {%- endfor -%}
  {% do return(false) %}
{% endmacro %}


{% macro sqlflow_time_column(relation, name, what, qualifier=none) %}
  {#-- `name` of `relation` as a TIMESTAMP expression: as is, cast, or parsed (NULL when it
       does not parse); a missing column is an error naming the yml to fix. `qualifier`: the
       alias to qualify the column with. --#}
  {%- for column in adapter.get_columns_in_relation(relation) -%}
    {%- if column.name | lower == name | lower -%}
      {%- set quoted = (qualifier ~ '.' if qualifier else '') ~ '`' ~ column.name ~ '`' -%}
      {%- set kind = column.dtype | lower -%}
      {%- if kind == 'timestamp' -%}
        {% do return(quoted) %}
      {%- elif kind in ('timestamp_ntz', 'date') -%}
        {% do return('cast(' ~ quoted ~ ' as timestamp)') %}
      {%- else -%}
        {% do return('try_to_timestamp(cast(' ~ quoted ~ ' as string))') %}
      {%- endif -%}
    {%- endif -%}
  {%- endfor -%}
  {% do exceptions.raise_compiler_error(
    "model " ~ model.name ~ ": input " ~ relation ~ " has no column `" ~ name ~ "`, its declared "
    ~ what ~ "; fix `" ~ what ~ "` under meta: sqlflow: in the source's yml") %}
{% endmacro %}


{% macro sqlflow_reason_sql(input) %}
  {#-- The quarantine reason of a row, NULL for a clean row (quarantine.reason_of). --#}
  {%- set raw = '`' ~ input.event_time ~ '`' -%}
  {%- set event = sqlflow_time_column(input.relation, input.event_time, 'event_time') -%}
  {%- set ingest = sqlflow_time_column(input.relation, input.ingest_time, 'ingest_time')
                   if input.ingest_time else 'cast(null as timestamp)' -%}
  {% do return({'event': event, 'ingest': ingest, 'reason':
      "case when " ~ raw ~ " is null then 'null_event_time'"
      ~ " when " ~ event ~ " is null then 'malformed'"
      ~ " when unix_micros(" ~ event ~ ") < unix_micros(" ~ ingest ~ ") - " ~ input.lateness_us ~ " then 'late'"
      ~ " when unix_micros(" ~ event ~ ") > unix_micros(" ~ ingest ~ ") + " ~ input.tolerance_us ~ " then 'future'"
      ~ " end"}) %}
{% endmacro %}


{% macro sqlflow_origin(relation) %}
  {#-- Where the rows were read: `schema.table@v<Delta version>`, as sqlflow writes it. --#}
  {%- set found = load_relation(relation) -%}
  {%- if found is not none and found.is_delta -%}
    {%- set history = run_query('describe history ' ~ relation ~ ' limit 1') -%}
    {% do return(relation ~ '@v' ~ history.columns['version'].values()[0]) %}
  {%- endif -%}
  {% do return(relation | string) %}
{% endmacro %}


{% macro sqlflow_prepare_quarantine(target_relation, sql) %}
  {#-- Create the clean views, pin the commit log for dim joins, and (re)write
       `<model>__quarantine` (`sql`: the model's compiled SQL); returns the views to drop.
       The quarantine table is replaced whole: dbt reads its inputs whole, so this run's
       rejected rows are all the rejected rows. --#}
  {%- set inputs = sqlflow_quarantine_inputs() -%}
  {%- set dim = sqlflow_prepare_dim_missing(sql) -%}
  {%- if not inputs and not dim.selects and not sqlflow_reads_streaming_model() -%}
    {% do return(dim.views) %}
  {%- endif -%}
  {%- set selects = [] -%}
  {%- for input in inputs -%}
    {%- set parts = sqlflow_reason_sql(input) -%}
    {%- call statement('sqlflow_clean_view_' ~ loop.index) -%}
      create or replace temporary view {{ input.view }} as
      select * from {{ input.relation }} where ({{ parts.reason }}) is null
    {%- endcall -%}
    {%- do selects.append(
      "select '" ~ model.name ~ "' as model, '" ~ input.relation ~ "' as input, reason,"
      ~ " event_time, ingest_time, raw, '" ~ sqlflow_origin(input.relation) ~ "' as origin,"
      ~ " date_format(coalesce(event_time, ingest_time), 'yyyy-MM-dd') as dt"
      ~ " from (select " ~ parts.reason ~ " as reason, " ~ parts.event ~ " as event_time, "
      ~ parts.ingest ~ " as ingest_time, to_json(struct(*), map("
      ~ "'timestampFormat', \"yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX\", "
      ~ "'timestampNTZFormat', \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS\")) as raw"
      ~ " from " ~ input.relation ~ ") where reason is not null") -%}
  {%- endfor -%}
  {#-- dim_missing rows (streaming_table_dim_missing.sql): after the clean views exist --#}
  {%- do selects.extend(dim.selects) -%}
  {%- if not selects -%}
    {%- do selects.append(
      "select cast(null as string) as model, cast(null as string) as input,"
      ~ " cast(null as string) as reason, cast(null as timestamp) as event_time,"
      ~ " cast(null as timestamp) as ingest_time, cast(null as string) as raw,"
      ~ " cast(null as string) as origin, cast(null as string) as dt where false") -%}
  {%- endif -%}
  {%- set quarantine = target_relation.incorporate(
        path={"identifier": target_relation.identifier ~ '__quarantine'}) -%}
  {%- call statement('sqlflow_quarantine') -%}
    create or replace table {{ quarantine }} using delta partitioned by (dt)
    {{ sqlflow_tblproperties('quarantine') }} as
    {{ selects | join('\nunion all\n') }}
  {%- endcall -%}
  {% do return((inputs | map(attribute='view') | list) + dim.views) %}
{% endmacro %}


{% macro sqlflow_drop_clean_views(views) %}
  {%- for view in views -%}
    {%- call statement('sqlflow_drop_clean_view_' ~ loop.index) -%}
      drop view if exists {{ view }}
    {%- endcall -%}
  {%- endfor -%}
{% endmacro %}
