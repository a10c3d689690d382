{#-
  dbt data test: every quarantined row of the staging models has one of the rule's reasons
  and keeps its raw payload. Returns the offending rows.
-#}
-- depends_on: {{ ref('stg_ad_impressions') }}, {{ ref('stg_ad_clicks') }}, {{ ref('stg_user_events') }}
{%- set models = ['stg_ad_impressions', 'stg_ad_clicks', 'stg_user_events'] %}
{%- for name in models %}
select model, input, reason, raw
from {{ ref(name).incorporate(path={'identifier': name ~ '__quarantine'}) }}
where reason not in ('late', 'future', 'null_event_time', 'malformed', 'oversized', 'bad_json',
                     'wrong_type') or raw is null
{% if not loop.last %}union all{% endif %}
{%- endfor %}
