{#-
  dbt data test (run by `dbt build` / `dbt test`): no staging row breaks its source's
  lateness rule (docs/design.md §2.1); such rows belong in `<model>__quarantine`. The rule's numbers
  come from the sources' `meta.sqlflow` (models/sources.yml). Returns the offending rows.
-#}
-- depends_on: {{ ref('stg_ad_impressions') }}, {{ ref('stg_ad_clicks') }}, {{ ref('stg_user_events') }}
{%- set staged = [('stg_ad_impressions', 'ods', 'ods_ad_impressions'),
                  ('stg_ad_clicks', 'ods', 'ods_ad_clicks'),
                  ('stg_user_events', 'ods', 'ods_user_events')] %}
{%- if execute %}
{%- for model_name, source_name, table_name in staged %}
{%- set rule = sqlflow_event_semantics(source_name, table_name) %}
{%- set t, ingest = rule['event_time'], rule['ingest_time'] %}
select '{{ model_name }}' as model, {{ t }} as event_time, {{ ingest }} as ingest_time
from {{ ref(model_name) }}
where {{ t }} is null
   or unix_micros({{ t }}) < unix_micros({{ ingest }}) - {{ sqlflow_duration_us(rule['allowed_lateness'], 'allowed_lateness') }}
   or unix_micros({{ t }}) > unix_micros({{ ingest }}) + {{ sqlflow_duration_us(rule['future_tolerance'], 'future_tolerance') }}
{% if not loop.last %}union all{% endif %}
{%- endfor %}
{%- else %}
select 1 as model where false
{%- endif %}
