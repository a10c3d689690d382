{#--
  interval_join: an event-time interval join (docs/design.md §2.2), inner, left outer or right outer.

      select i.req_id, i.imp_ts, c.click_ts
      from {{ source('ods', 'ods_ad_impressions') }} as i
      {{ interval_join('left', source('ods', 'ods_ad_clicks'), 'c', 'i',
                       keys=['req_id', 'ad_id'], left_time='imp_ts', right_time='click_ts',
                       lower='0 seconds', upper='20 minutes') }}

  renders

      left join ods.ods_ad_clicks as c
        on i.req_id = c.req_id
       and i.ad_id = c.ad_id
       and c.click_ts between i.imp_ts and i.imp_ts + interval '20 minutes'

  Arguments:
    join_type    'inner', 'left' or 'right'
    right        the joined relation: a ref() or source() value
    right_alias  its alias
    left_alias   the alias of the table already in the FROM that the bound is relative to
    keys         equality keys: ['col', ...] (same name on both sides) and/or
                 [['left_col', 'right_col'], ...]; a single 'col' is one key
    left_time    event-time column of the left side
    right_time   event-time column of the right side
    lower/upper  '<integer> <unit>', unit one of microseconds, milliseconds, seconds, minutes,
                 hours, days (singular too); may be negative: '-20 minutes'; several parts
                 add up: '3 minutes 30 seconds', '-1 hour -30 minutes' (one sign for all)

  The result is plain SQL: `right.t BETWEEN left.t + lower AND left.t + upper`, inclusive,
  exactly what a person would write. sqlflow recognises the interval join from this ON clause
  (not from the macro), so the macro only saves typing and validates the arguments.
  docs/macros.md has the details.
--#}
{% macro interval_join(join_type, right, right_alias, left_alias, keys, left_time, right_time,
                       lower, upper) -%}
  {#-- Validate everything first: a bad argument must stop the render with a message naming
       the choices, not produce SQL the compiler then rejects for a less obvious reason. --#}
  {%- set how = interval_join_type(join_type) -%}
  {%- if right is not defined or right is none or right is string -%}
    {% do exceptions.raise_compiler_error(
      "interval_join: `right` must be a ref() or source() value, e.g. ref('stg_ad_clicks') "
      ~ "(got: " ~ (right if right is defined else 'nothing') ~ "); a table name as a string "
      ~ "hides the dependency from dbt and sqlflow") %}
  {%- endif -%}
  {%- for name, value in [('right_alias', right_alias), ('left_alias', left_alias),
                          ('left_time', left_time), ('right_time', right_time)] -%}
    {%- if value is not defined or value is not string or not value | trim -%}
      {% do exceptions.raise_compiler_error(
        "interval_join: `" ~ name ~ "` must be a name, e.g. "
        ~ {'right_alias': "'c'", 'left_alias': "'i'", 'left_time': "'imp_ts'",
           'right_time': "'click_ts'"}[name]
        ~ " (got: " ~ (value if value is defined else 'nothing') ~ ")") %}
    {%- endif -%}
  {%- endfor -%}
  {%- set pairs = interval_join_keys(keys) -%}
  {%- set left_t = left_alias ~ '.' ~ left_time -%}
  {%- set low = interval_join_shift(left_t, lower, 'lower') -%}
  {%- set high = interval_join_shift(left_t, upper, 'upper') -%}
{{ how }} join {{ right }} as {{ right_alias }}
  on {% for l, r in pairs %}{{ left_alias }}.{{ l }} = {{ right_alias }}.{{ r }}
 and {% endfor %}{{ right_alias }}.{{ right_time }} between {{ low }} and {{ high }}
{%- endmacro %}


{% macro interval_join_type(join_type) -%}
  {#-- Full outer is left out on purpose: docs/design.md §2.2 defines inner, left and right. --#}
  {%- set valid = ['inner', 'left', 'right'] -%}
  {%- if join_type is not defined or join_type is not string or join_type | lower not in valid -%}
    {% do exceptions.raise_compiler_error(
      "interval_join: unknown join_type `" ~ (join_type if join_type is defined else 'nothing')
      ~ "`; valid choices: '" ~ valid | join("', '") ~ "'") %}
  {%- endif -%}
  {% do return(join_type | lower) %}
{%- endmacro %}


{% macro interval_join_keys(keys) -%}
  {#-- Returns [[left_col, right_col], ...]. At least one key is required: a join of two
       streams without an equality key keeps unbounded state (docs/design.md §2.2). --#}
  {%- set example = "keys=['req_id'] or keys=[['left_col', 'right_col']]" -%}
  {%- set items = [keys] if keys is string else keys -%}
  {%- if items is not defined or items is none or items is string or items is mapping
         or items is not sequence or items | length == 0 -%}
    {% do exceptions.raise_compiler_error(
      "interval_join: `keys` must list at least one equality key, e.g. " ~ example
      ~ " (got: " ~ (keys if keys is defined else 'nothing') ~ ")") %}
  {%- endif -%}
  {%- set pairs = [] -%}
  {%- for key in items -%}
    {%- set pair = [key, key] if key is string else key -%}
    {%- if pair is string or pair is mapping or pair is not sequence or pair | length != 2
           or pair | reject('string') | list or '' in pair | map('trim') | list -%}
      {% do exceptions.raise_compiler_error(
        "interval_join: key `" ~ key ~ "` is neither a column name nor a [left_col, right_col] "
        ~ "pair; write " ~ example) %}
    {%- endif -%}
    {%- do pairs.append(pair) -%}
  {%- endfor -%}
  {% do return(pairs) %}
{%- endmacro %}


{% macro interval_join_shift(column, duration, which) -%}
  {#-- `column + interval '<duration>'`, the duration passed through as written: Spark reads
       the string literal exactly, to the microsecond. One or more parts '<integer> <unit>'
       of fixed-length units ('3 minutes 30 seconds'). Every part carries its own sign in
       Spark ('-1 hour 30 minutes' is -30 minutes), so parts of mixed signs are refused;
       months and years have no fixed length, so neither can bound a join. --#}
  {%- set units = 'microseconds, milliseconds, seconds, minutes, hours, days' -%}
  {%- set unit_us = {'microsecond': 1, 'millisecond': 1000, 'second': 1000000,
                     'minute': 60000000, 'hour': 3600000000, 'day': 86400000000} -%}
  {%- set part = '(-?)(\\d+)\\s+(microsecond|millisecond|second|minute|hour|day)s?' -%}
  {%- set text = duration | trim if duration is defined and duration is string else '' -%}
  {%- set found = modules.re.match('(?i)^' ~ part ~ '(?:\\s+' ~ part ~ ')*$', text) -%}
  {%- if not found -%}
    {% do exceptions.raise_compiler_error(
      "interval_join: `" ~ which ~ "` must be a duration '<integer> <unit>' (one or more such "
      ~ "parts), unit one of " ~ units ~ ", e.g. '20 minutes', '3 minutes 30 seconds', "
      ~ "'0 seconds' or '-20 minutes' (got: " ~ (duration if duration is defined else 'nothing') ~ ")") %}
  {%- endif -%}
  {%- set parts = modules.re.findall('(?i)' ~ part, text) -%}
  {%- if parts | map(attribute=0) | unique | list | length > 1 -%}
    {% do exceptions.raise_compiler_error(
      "interval_join: `" ~ which ~ "` mixes signs (got: " ~ duration ~ "); Spark applies each "
      ~ "part's own sign ('-1 hour 30 minutes' is -30 minutes): sign every part, e.g. "
      ~ "'-1 hour -30 minutes', or write one part, e.g. '-90 minutes'") %}
  {%- endif -%}
  {#-- A zero bound is the column itself, as a person writes it (`between i.t and ...`);
       adding a zero interval would change nothing but the text of the plan. --#}
  {%- set total = namespace(us=0) -%}
  {%- for sign, amount, unit in parts -%}
    {%- set total.us = total.us + (amount | int) * unit_us[unit | lower] -%}
  {%- endfor -%}
  {%- if total.us == 0 -%}
    {% do return(column) %}
  {%- endif -%}
  {% do return(column ~ " + interval '" ~ text ~ "'") %}
{%- endmacro %}
