{#-
  CTR training samples: every impression, labelled 1 when its ad was clicked within 20 minutes
  of being shown (both ends inclusive), else 0. A label-0 row is final only once no click can
  still arrive for it (20 minutes plus the clicks' allowed lateness after the impression); the
  stream emits it then (docs/design.md §2.9, outer joins).

  Rows are a multiset, like the input: an impression matched by two click records is two rows
  with label 1, and a duplicated impression stays duplicated. Nothing is deduplicated here, so
  upstream duplicates stay visible to whoever consumes the samples.

  Reads the ODS sources rather than the staging models: those are `table` models, which a
  stream reads statically, so the join would not be an interval join of two streams.
  (Jinja comments, so they stay out of the compiled SQL.)
-#}
{{ config(materialized='streaming_table', file_format='delta', partition_by=['dt', 'hour']) }}

select
    i.req_id,
    i.ad_id,
    i.user_id,
    i.imp_ts,
    i.ingest_ts,
    c.click_ts,
    case when c.req_id is null then 0 else 1 end as label,
    date_format(i.imp_ts, 'yyyy-MM-dd') as dt,
    date_format(i.imp_ts, 'HH') as hour
from {{ ref('stg_ad_impressions') }} as i
{{ interval_join('left', ref('stg_ad_clicks'), 'c', 'i',
                 keys=['req_id', 'ad_id'], left_time='imp_ts', right_time='click_ts',
                 lower='0 seconds', upper='20 minutes') }}
