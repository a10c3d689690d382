"""The demo's production scenario in numbers: sizes, mixes and dirty-row rates.

This is the one place these numbers live. `models/sources.yml` declares the same lateness
and future tolerance for every ODS source (a test reads the yml and compares), so the rows
the generator makes late are exactly the rows the sources' rules call late.

Every rate is a fraction of the rows of a table before re-delivery: each generated row gets
at most one defect (late, future, null event time, null key, malformed payload, malformed
spmid), then DUPLICATE_RATE of all rows are delivered a second time, byte for byte.
"""

from __future__ import annotations

from datetime import date, timedelta

from sqlflow.runtime.delta import markers

# --- defaults of `sqlflow demo` (a couple of minutes on two cores) ---
DEFAULT_ROWS = 200_000  # ad impressions; clicks and user events scale with it
KAFKA_ROWS = 20_000  # `sqlflow demo` over Kafka: every record goes through the broker one by one
DEFAULT_SEED = 42
DEFAULT_DAYS = 2
DEFAULT_START = date(2026, 11, 1)

# --- source semantics, mirrored in models/sources.yml (docs/design.md §2.1) ---
ALLOWED_LATENESS = timedelta(minutes=10)
FUTURE_TOLERANCE = timedelta(minutes=5)

# --- dirty rows, per ODS table (fractions of generated rows) ---
# Late: a phone buffers events offline and uploads them after reconnecting.
LATE_RATE = 0.01
# Future: a device clock running ahead; the event claims a time after it arrived.
FUTURE_RATE = 0.002
# Null event time: an old SDK that forgets to stamp some events.
NULL_EVENT_TIME_RATE = 0.001
# Null key: a logged-out or broken client (null user_id, req_id, ad_id or event_id).
NULL_KEY_RATE = 0.002
# Malformed payload (ods_user_events only): truncated or non-JSON bodies.
MALFORMED_PAYLOAD_RATE = 0.003
# Malformed spmid (ods_user_events only): missing, empty or extra parts.
MALFORMED_SPMID_RATE = 0.003
# Duplicates: at-least-once producers re-deliver a row unchanged.
DUPLICATE_RATE = 0.005

# --- arrival delay of clean rows: normal, in seconds, clamped ---
INGEST_DELAY_MEAN_S = 2.0
INGEST_DELAY_SD_S = 1.0
INGEST_DELAY_MIN_S = 0.01  # a row never arrives before it happened, even after ms rounding
INGEST_DELAY_MAX_S = 20.0  # well under the lateness, so only injected rows are late
# Late rows arrive ALLOWED_LATENESS + LATE_EXTRA_MIN + up to LATE_EXTRA_SPAN after the event;
# future rows claim FUTURE_TOLERANCE + FUTURE_EXTRA_MIN + up to FUTURE_EXTRA_SPAN ahead.
LATE_EXTRA_MIN = timedelta(seconds=30)
LATE_EXTRA_SPAN = timedelta(hours=3)
FUTURE_EXTRA_MIN = timedelta(seconds=30)
FUTURE_EXTRA_SPAN = timedelta(hours=1)

# --- ads ---
CLICK_RATE = 0.05
# Click delay after its impression: exponential with this mean, truncated at the maximum, so
# about 6% of clicks fall beyond the 20-minute join window.
CLICK_DELAY_MEAN = timedelta(minutes=8)
CLICK_DELAY_MAX = timedelta(minutes=30)
# Ad ids are Zipf(1)-distributed over the catalogue: the top 1% of ads get about half the traffic.
ADS_PER_ROW = 1 / 40
MIN_ADS, MAX_ADS = 100, 100_000

# --- users and events ---
USERS_PER_ROW = 1 / 10
MIN_USERS, MAX_USERS = 100, 2_000_000
EVENTS_PER_IMPRESSION = 2

# Traffic by hour of day (UTC), a daily curve peaking in the evening.
HOUR_WEIGHTS = (2, 1, 1, 1, 1, 1, 2, 3, 4, 4, 4, 5, 6, 5, 4, 4, 5, 6, 7, 8, 9, 9, 7, 4)

# spmid departments with very different volumes, and the pages and modules each one has.
DEPARTMENTS = {
    "main": 0.50, "live": 0.25, "ad": 0.12, "game": 0.08, "manga": 0.04, "music": 0.01,
}
PAGES = {
    "main": ("home", "detail", "search", "dynamic"),
    "live": ("room", "square", "follow"),
    "ad": ("splash", "feed", "banner"),
    "game": ("center", "detail"),
    "manga": ("reader", "shelf"),
    "music": ("player", "playlist"),
}
MODULES = ("card", "list", "gift", "comment", "player", "tab")
MAX_POSITION = 20
# Malformed spmids as they show up in production logs.
BAD_SPMIDS = ("", "main.home", "main..card.1", "live.room.gift.3.extra", "undefined", "main home card 1")

EVENT_TYPES = {"show": 0.55, "pv": 0.30, "click": 0.15}
PRODUCTS = {"app": 0.70, "web": 0.15, "pad": 0.06, "tv": 0.05, "car": 0.02, "watch": 0.02}
NETWORKS = ("wifi", "4g", "5g", "ethernet")
APP_VERSIONS = ("8.10.0", "8.11.2", "8.12.0", "7.66.1")

# --- dimensions ---
AGE_BANDS = ("<18", "18-24", "25-30", "31-40", "41-50", "50+")
GENDERS = ("m", "f", "unknown")
CITIES = ("shanghai", "beijing", "guangzhou", "shenzhen", "chengdu", "hangzhou", "wuhan", "xian")
AD_CATEGORIES = ("game", "ecommerce", "education", "finance", "auto", "food", "travel")
CREATIVE_TYPES = ("video", "image", "text")
ADVERTISERS_PER_AD = 1 / 20
CAMPAIGNS_PER_AD = 1 / 4

# Readiness marker written into every ready partition directory of a dimension table.
READY_MARKER = markers.READY_MARKER  # the file a ready dimension partition holds
