-- Ad clicks as landed, with the columns' types fixed. Late, future and malformed rows go to
-- the model's quarantine table (docs/design.md §2.1); every other row is kept.
{{ config(materialized='streaming_table', file_format='delta', partition_by=['dt', 'hour']) }}

select
    cast(req_id as string) as req_id,
    cast(ad_id as bigint) as ad_id,
    cast(user_id as bigint) as user_id,
    cast(click_ts as timestamp) as click_ts,
    cast(ingest_ts as timestamp) as ingest_ts,
    cast(dt as string) as dt,
    cast(hour as string) as hour
from {{ source('ods', 'ods_ad_clicks') }}
