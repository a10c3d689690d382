{#--
  `dim_missing` under `dbt run` (docs/design.md §2.3), the same rows as `sqlflow run --mode batch`
  (src/sqlflow/dimplan.py `missing_sql`, src/sqlflow/runtime/snapshot.py `missing_rows`).

  In a `streaming_table` model run by `dbt run`/`build`/`retry`, every `dim_join` reads READY
  from the model's temporary view `<model>__sqlflow_ready`: the commit log at ONE Delta version
  v, which the materialization pins before the model's query runs. The model's query and the
  dim_missing query below read that same version, as sqlflow's pinned snapshot does.

  An inner `dim_join` also leaves a comment in the compiled SQL,
  `/* sqlflow_dim_missing {"dim": ..., "fact_alias": ..., "fact_date": ..., ...} */`. From
  those comments the materialization builds one query over the fact table: the fact rows whose
  date has no READY partition within `max_fallback` for some inner dim join, with `input` =
  the first such dimension. They go to `<model>__quarantine` with reason `dim_missing`,
  `raw` = the fact row as JSON, event and ingest time of the fact, and origin
  `commit_log@v<v>`: the columns and values sqlflow writes (origin names the commit-log
  version each run pinned, so two runs with commits in between differ there only).

  The fact table is the relation the compiled SQL reads as `<fact_alias>` (`from X as e`):
  one of the model's sources (its clean view) or refs. A fact that is none of them (a CTE, a
  subquery) gets no dim_missing rows, as in sqlflow. Its event time: a source's `meta.sqlflow`
  `event_time`/`ingest_time`; for a model, its `event_time` config, else the event time of the
  first of its inputs whose event-time column the model passes through under the same name,
  and the ingest time of its first event input when the model keeps that column.

  Differences from sqlflow (docs/macros.md): the model's WHERE conditions on the fact table
  are not applied to the dim_missing rows (sqlflow applies them: it reads the SQL as a tree;
  a WHERE after the last dim_join, whose end is marked `/* sqlflow_dim_join_end */`, gets a
  warning), and `_SUCCESS` markers count once sqlflow recorded them in the commit log (any
  sqlflow run that reads the dimension, `sqlflow dbt run`, or `sqlflow mark-ready`): Spark SQL
  lists no `_`-files.
--#}

{% macro sqlflow_ready_view() %}
  {#-- The model's pinned view of the commit log; one per model, as parallel threads run models. --#}
  {%- set name = model.name ~ '__sqlflow_ready' -%}
  {% do return(api.Relation.create(identifier=name, type='view').include(database=false, schema=false)) %}
{% endmacro %}


{% macro sqlflow_prepare_dim_missing(sql) %}
  {#-- Pin the commit log for the model's dim joins; returns {'views': [the view to drop],
       'selects': [the dim_missing quarantine query]} (both empty without dim joins). --#}
  {%- set ready = sqlflow_ready_view() -%}
  {%- if (ready | string) not in sql -%}
    {% do return({'views': [], 'selects': []}) %}
  {%- endif -%}
  {% do run_query("create schema if not exists sqlflow") %}
  {% do run_query(sqlflow_commit_log_ddl()) %}
  {%- set version = run_query('describe history sqlflow.commit_log limit 1').columns['version'].values()[0] -%}
  {%- call statement('sqlflow_ready_view') -%}
    create or replace temporary view {{ ready }} as
    select * from sqlflow.commit_log version as of {{ version }}
  {%- endcall -%}
  {%- set specs = [] -%}
  {%- for text in modules.re.findall('/\\* sqlflow_dim_missing (\\{.*?\\}) \\*/', sql) -%}
    {%- do specs.append(fromjson(text)) -%}
  {%- endfor -%}
  {%- if specs and modules.re.search('(?i)\\bwhere\\b', sql.split('/* sqlflow_dim_join_end */')[-1]) -%}
    {% do exceptions.warn("model " ~ model.name ~ ": under dbt the dim_missing rows of its inner "
         ~ "dim_join are quarantined before the model's WHERE conditions (sqlflow applies those "
         ~ "on the fact table first); filter the fact rows in an upstream model to get the same rows") %}
  {%- endif -%}
  {%- set fact = sqlflow_dim_fact(sql, specs[0].fact_alias) if specs else none -%}
  {%- if fact is none -%}
    {% do return({'views': [ready], 'selects': []}) %}
  {%- endif -%}
  {% do return({'views': [ready], 'selects': [sqlflow_dim_missing_sql(specs, fact, ready, version)]}) %}
{% endmacro %}


{% macro sqlflow_dim_fact(sql, alias) %}
  {#-- The input the compiled SQL reads as `alias`: {'name': as written, 'relation': the table
       behind it, 'times': {'event', 'ingest'} column names}; none for a CTE or subquery. --#}
  {%- set inputs = [] -%}
  {%- for pair in model.sources -%}
    {%- set relation = builtins.source(pair[0], pair[1]) -%}
    {%- set semantics = sqlflow_event_semantics(pair[0], pair[1]) or {} -%}
    {%- set times = {'event': semantics.get('event_time'), 'ingest': semantics.get('ingest_time')} -%}
    {%- for name in [relation, sqlflow_clean_view(relation)] -%}
      {%- do inputs.append({'name': name | string, 'relation': relation, 'times': times, 'node': none}) -%}
    {%- endfor -%}
  {%- endfor -%}
  {%- for node_id in model.depends_on.nodes if node_id.startswith('model.') -%}
    {%- set node = graph.nodes.get(node_id) -%}
    {%- if node -%}
      {%- do inputs.append({'name': ref(node.name) | string, 'relation': ref(node.name),
                            'times': none, 'node': node}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set pattern = '(?i)\\bfrom\\s+(\\S+)\\s+(?:as\\s+)?' ~ modules.re.escape(alias) ~ '\\b' -%}
  {%- for token in modules.re.findall(pattern, sql) -%}
    {%- for input in inputs if input.name | replace('`', '') | lower == token | replace('`', '') | lower -%}
      {%- set columns = adapter.get_columns_in_relation(input.relation) | map(attribute='name')
                        | map('lower') | list -%}
      {%- set times = input.times if input.node is none else sqlflow_model_times(input.node, columns) -%}
      {% do return({'name': token, 'relation': input.relation, 'times': times, 'columns': columns,
                    'is_source': input.node is none}) %}
    {%- endfor -%}
  {%- endfor -%}
  {% do return(none) %}
{% endmacro %}


{% macro sqlflow_model_times(node, columns) %}
  {#-- A model's event and ingest time columns as sqlflow binds them when a model reads it. --#}
  {%- set found = [] -%}
  {%- for pair in node.sources -%}
    {%- set semantics = sqlflow_event_semantics(pair[0], pair[1]) -%}
    {%- if semantics -%}
      {%- do found.append({'event': semantics.get('event_time'), 'ingest': semantics.get('ingest_time')}) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- for node_id in node.depends_on.nodes if node_id.startswith('model.') -%}
    {%- set upstream = graph.nodes.get(node_id) -%}
    {%- if upstream and upstream.config.materialized == 'streaming_table' -%}
      {%- do found.append(sqlflow_model_times(upstream, none)) -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set streaming = node.config.materialized == 'streaming_table' -%}
  {%- set ingest = found[0].ingest if found and streaming else none -%}
  {%- set event = node.config.get('event_time') -%}
  {%- if not event -%}
    {%- for f in found if f.event and (columns is none or f.event | lower in columns) -%}
      {% do return({'event': f.event, 'ingest': ingest}) %}
    {%- endfor -%}
  {%- endif -%}
  {% do return({'event': event, 'ingest': ingest}) %}
{% endmacro %}


{% macro sqlflow_dim_missing_sql(specs, fact, ready, version) %}
  {#-- The dim_missing quarantine rows (columns of the quarantine table) of the inner dim joins
       `specs` over `fact`: a fact row is missing when one of them has no p* for its day. --#}
  {%- set alias = specs[0].fact_alias -%}
  {%- set times = fact.times -%}
  {%- if times.event -%}
    {%- set event = sqlflow_time_column(fact.relation, times.event, 'event_time', alias) -%}
  {%- else -%}
    {%- set event = 'cast(null as timestamp)' -%}
  {%- endif -%}
  {#-- a model that does not keep its input's ingest column has none (sqlflow: NULL) --#}
  {%- if times.ingest and (fact.is_source or times.ingest | lower in fact.columns) -%}
    {%- set ingest = sqlflow_time_column(fact.relation, times.ingest, 'ingest_time', alias) -%}
  {%- else -%}
    {%- set ingest = 'cast(null as timestamp)' -%}
  {%- endif -%}
  {%- set query -%}
select '{{ model.name }}' as model, __sqlflow_dim as input, 'dim_missing' as reason,
       event_time, ingest_time, raw, 'commit_log@v{{ version }}' as origin,
       date_format(coalesce(event_time, ingest_time), 'yyyy-MM-dd') as dt
from (
    select case
    {%- for spec in specs %}
        when __sqlflow_m{{ loop.index0 }}.__sqlflow_day is null then '{{ spec.dim }}'
    {%- endfor %}
           end as __sqlflow_dim,
           {{ event }} as event_time, {{ ingest }} as ingest_time,
           to_json(struct({{ alias }}.*), map('timestampFormat', "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
                   'timestampNTZFormat', "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")) as raw
    from {{ fact.name }} as {{ alias }}
    {%- for spec in specs %}
    left join {{ sqlflow_dim_days(spec.dim, spec.partition_column, spec.max_fallback, ready) }} as __sqlflow_m{{ loop.index0 }}
      on __sqlflow_m{{ loop.index0 }}.__sqlflow_day = to_date({{ spec.fact_date }})
    {%- endfor %}
    where {% for spec in specs %}__sqlflow_m{{ loop.index0 }}.__sqlflow_day is null{{ ' or ' if not loop.last }}{% endfor %}
)
  {%- endset -%}
  {% do return(query) %}
{% endmacro %}
