-- User events of the `music` department, partitioned dt / hour / event_type / product.
-- One of six routed siblings: sqlflow reads stg_user_events ONCE for all of them.
{{ route_to(ref('stg_user_events'), 'music') }}
