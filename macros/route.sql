{#-
  Multi-level partition routing (docs/design.md §2.4). See docs/macros.md.

  route_levels(event_time, tags): the partition level columns of a routed table:
    dt    'yyyy-MM-dd' of the event time (session time zone, UTC in the demo)
    hour  'HH' of the event time
    one column per row tag (e.g. event_type, product), NULL tags as 'unknown'
  route_to(parent, key, ...): one routed target: the parent's rows whose routing key
  (default: the spmid department, `spmid_department(spmid)` from udfs/spmid.py) equals `key`,
  projected to `columns` plus the partition levels.

  Each target is an ordinary model (dbt builds it on its own); sqlflow fuses the siblings of
  one `routing` group into one read of the parent (sqlflow compile shows a RoutedPlan).
-#}

{% macro route_levels(event_time='event_ts', tags=['event_type', 'product']) -%}
date_format({{ event_time }}, 'yyyy-MM-dd') as dt,
    date_format({{ event_time }}, 'HH') as hour
{%- for tag in tags %},
    coalesce(cast({{ tag }} as string), 'unknown') as {{ tag }}
{%- endfor %}
{%- endmacro %}


{% macro route_to(parent, key, columns=['event_id', 'user_id', 'spmid', 'event_ts', 'ingest_ts', 'payload'],
                  route_key='spmid_department(spmid)', event_time='event_ts',
                  tags=['event_type', 'product']) -%}
select
{%- for column in columns %}
    {{ column }},
{%- endfor %}
    {{ route_levels(event_time, tags) }}
from {{ parent }}
where {{ route_key }} = '{{ key }}'
{%- endmacro %}
