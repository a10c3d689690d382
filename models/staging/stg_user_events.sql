-- User events as landed, with the columns' types fixed. Late, future and null-time rows go to
-- quarantine; every other row is kept, malformed spmids
-- and payloads included: routing and quarantine decide what to do with them later.
{{ config(materialized='streaming_table', file_format='delta', partition_by=['dt', 'hour']) }}

select
    cast(event_id as string) as event_id,
    cast(user_id as bigint) as user_id,
    cast(spmid as string) as spmid,
    cast(event_type as string) as event_type,
    cast(product as string) as product,
    cast(event_ts as timestamp) as event_ts,
    cast(ingest_ts as timestamp) as ingest_ts,
    cast(payload as string) as payload,
    cast(dt as string) as dt,
    cast(hour as string) as hour
from {{ source('ods', 'ods_user_events') }}
