{#-
  Clicks attributed to their impression: each click with the impression of the same request
  and ad shown at most 20 minutes before it (both ends inclusive); a click without one is not
  here (inner join). Rows are a multiset, like the input: a click matching two impression
  records is two rows; nothing is deduplicated.

  The clicks are the FROM side, so the model's event time is the click time, the same column
  the `dt`/`hour` partitions come from; the bound is therefore written from the click:
  `i.imp_ts between c.click_ts - 20 minutes and c.click_ts`.
  Reads the ODS sources for the reason given in dwd_ad_click_samples.sql.
-#}
{{ config(materialized='streaming_table', file_format='delta', partition_by=['dt', 'hour']) }}

select
    c.req_id,
    c.ad_id,
    c.user_id,
    c.click_ts,
    c.ingest_ts,
    i.imp_ts,
    i.user_id as imp_user_id,
    date_format(c.click_ts, 'yyyy-MM-dd') as dt,
    date_format(c.click_ts, 'HH') as hour
from {{ ref('stg_ad_clicks') }} as c
{{ interval_join('inner', ref('stg_ad_impressions'), 'i', 'c',
                 keys=['req_id', 'ad_id'], left_time='click_ts', right_time='imp_ts',
                 lower='-20 minutes', upper='0 seconds') }}
