{#-
  User events widened with the daily user and ad dimensions (docs/design.md §2.3). Each event joins
  the newest READY partition of each dimension within one day before its event date
  (`max_fallback=1`): the demo's newest dim_user day is missing and its newest dim_ad day is
  written but not ready, so events of that day use the day before, and say so in `user_dt`
  and `ad_dt`. No ready dim_user partition in range: the event goes to the quarantine table
  with reason `dim_missing` (inner join). dim_ad is a left join: events that are not ad
  slots, or with no ready dim_ad partition, keep NULL ad columns.
  In the demo an `ad.*` spmid's last part (the slot position) stands in for the ad id.
-#}
{{ config(materialized='streaming_table', file_format='delta', partition_by=['dt']) }}

select
    e.event_id,
    e.user_id,
    e.spmid,
    e.event_type,
    e.product,
    e.event_ts,
    e.ingest_ts,
    u.age_band,
    u.gender,
    u.city,
    u.vip_level,
    u.dt as user_dt,
    a.ad_id,
    a.advertiser_id,
    a.ad_category,
    a.bid_cpm,
    a.dt as ad_dt,
    date_format(e.event_ts, 'yyyy-MM-dd') as dt
from {{ ref('stg_user_events') }} as e
{{ dim_join('inner', source('dim', 'dim_user'), 'u', 'e', keys=['user_id'],
            fact_date='to_date(e.event_ts)', partition_column='dt', max_fallback=1) }}
{{ dim_join('left', source('dim', 'dim_ad'), 'a', 'e',
            keys=[["case when e.spmid like 'ad.%' then try_cast(substring_index(e.spmid, '.', -1) as bigint) end", 'ad_id']],
            fact_date='to_date(e.event_ts)', partition_column='dt', max_fallback=1) }}
