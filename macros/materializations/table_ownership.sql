{#--
  dbt-spark's `tblproperties` clause, plus the owner sqlflow records and checks (docs/semantics.md,
  "Table ownership"): every table dbt's own materializations create for a model (`table`, an
  `incremental` model's first build, a snapshot) carries `sqlflow.model` = the model's name and
  `sqlflow.role` = `sink`, like the tables `streaming_table` and sqlflow create. So a model
  built by `dbt run` can later be rebuilt by `sqlflow run` (and back) without a manual claim.
  dbt looks for `spark__tblproperties_clause` in the root project before its adapter's.
--#}
{% macro spark__tblproperties_clause() -%}
  {%- if model is defined and model is mapping and model.get('resource_type') in ('model', 'snapshot') -%}
    {{ sqlflow_tblproperties('sink') }}
  {%- else -%}
    {{ dbt_spark_tblproperties_clause() }}
  {%- endif -%}
{%- endmacro %}


{% macro dbt_spark_tblproperties_clause() -%}
  {#-- dbt-spark 1.11's own clause: the config's tblproperties only --#}
  {%- set tblproperties = config.get('tblproperties') -%}
  {%- if tblproperties is not none %}
    tblproperties (
      {%- for prop in tblproperties -%}
      '{{ prop }}' = '{{ tblproperties[prop] }}' {% if not loop.last %}, {% endif %}
      {%- endfor %}
    )
  {%- endif %}
{%- endmacro %}
