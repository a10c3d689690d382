"""Spark analysis errors mapped to the model file's line and column, without a JVM: a fake
exception carries exactly the fields pyspark 4.2 exposes (getCondition, getMessageParameters,
getQueryContext with fragment/startIndex), over plans compiled from small projects."""

from __future__ import annotations

import dataclasses
import json
from enum import Enum

import pytest

from helpers import ad_sources_yml, make_project
from sqlflow.compiler import compile_project, plan_json_text
from sqlflow.errors import Location, SqlflowError
from sqlflow.runtime.analysis_errors import (
    SparkProblem,
    analysis_error,
    explain,
    find_in_model,
    model_errors,
    problem_of,
)


class Kind(Enum):  # pyspark's QueryContextType
    SQL = 0
    DataFrame = 1


@dataclasses.dataclass
class FakeContext:
    fragment_: str
    start: int
    kind: Kind = Kind.SQL
    object_type: str = ""

    def contextType(self):
        return self.kind

    def objectType(self):
        return self.object_type

    def objectName(self):
        return ""

    def fragment(self):
        return self.fragment_

    def startIndex(self):
        return self.start

    def stopIndex(self):
        return self.start + len(self.fragment_) - 1


class FakeAnalysisException(Exception):
    """What pyspark's AnalysisException answers, without Spark."""

    def __init__(self, condition, params, message, contexts=()):
        super().__init__(message)
        self.condition, self.params, self.message, self.contexts = condition, params, message, contexts

    def getCondition(self):
        return self.condition

    def getMessageParameters(self):
        return self.params

    def getMessage(self):
        return self.message

    def getQueryContext(self):
        return list(self.contexts)


def unresolved(name: str, plan_sql: str, fragment: str | None = None, nth: int = 0,
               proposal: str = "`i`.`req_id`, `i`.`ad_id`"):
    """Spark's UNRESOLVED_COLUMN for `fragment`, its context at the nth occurrence in plan_sql."""
    contexts = ()
    if fragment is not None:
        start = -1
        for _ in range(nth + 1):
            start = plan_sql.index(fragment, start + 1)
        contexts = (FakeContext(fragment, start),)
    return FakeAnalysisException(
        "UNRESOLVED_COLUMN.WITH_SUGGESTION", {"objectName": name, "proposal": proposal},
        f"[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name "
        f"{name} cannot be resolved. Did you mean one of the following? [{proposal}]. SQLSTATE: 42703",
        contexts)


def plan_of(tmp_path, sql: str, mode: str = "batch", name: str = "m"):
    root = make_project(tmp_path, models={f"{name}.sql": sql}, yml={"sources.yml": ad_sources_yml()})
    result = compile_project(root, mode=mode)
    result.raise_if_errors()
    return result.plans[name]


def where_in_file(sql: str, text: str, nth: int = 0) -> tuple[int, int]:
    """1-based (line, col) of the nth `text` in the model file."""
    pos = -1
    for _ in range(nth + 1):
        pos = sql.index(text, pos + 1)
    return sql.count("\n", 0, pos) + 1, pos - (sql.rfind("\n", 0, pos) + 1) + 1


JINJA_ABOVE = """\
{{ config(materialized='table') }}
{% set extra = ['ad_id', 'imp_ts'] %}
{#- a comment over
    three lines -#}
SELECT i.req_id,
{%- for c in extra %}
       i.{{ c }},
{%- endfor %}
       {% if true %}i.nosuch{% endif %} AS x
FROM {{ source('ods', 'imps') }} AS i
"""


def test_an_unknown_column_is_reported_at_its_model_line_below_jinja_that_changes_lines(tmp_path):
    plan = plan_of(tmp_path, JINJA_ABOVE)
    rendered_line = next(i for i, line in enumerate(plan.source_map.rendered_lines, 1) if "nosuch" in line)
    line, col = where_in_file(JINJA_ABOVE, "i.nosuch")
    assert rendered_line != line  # the Jinja above did shift it
    err = analysis_error(unresolved("`i`.`nosuch`", plan.sql, "i.nosuch"), plan)
    (diag,) = err.diagnostics
    assert diag.location == Location("models/m.sql", line, col) == Location("models/m.sql", 9, 21)
    assert diag.message == "model `m`: column `i`.`nosuch` does not exist"
    assert diag.hint.startswith("Spark suggests `i`.`req_id`, `i`.`ad_id`")
    assert "target/sqlflow/batch/m.sql" in diag.hint


def test_the_occurrence_spark_pointed_at_is_the_one_reported(tmp_path):
    sql = ("{{ config(materialized='table') }}\n"
           "SELECT i.req_id, nosuch AS a\n"
           "FROM {{ source('ods', 'imps') }} AS i\n"
           "WHERE nosuch > 0 AND i.ad_id > 0\n")
    plan = plan_of(tmp_path, sql)
    for nth in (0, 1):
        err = analysis_error(unresolved("`nosuch`", plan.sql, "nosuch", nth=nth), plan)
        assert err.diagnostics[0].location == Location("models/m.sql", *where_in_file(sql, "nosuch", nth))


def test_formatting_case_and_quoting_differences_do_not_matter(tmp_path):
    sql = ("{{ config(materialized='table') }}\n"
           "select I.req_id,\n"
           "  `I` . `NoSuch`  +   1 as x from {{ source('ods', 'imps') }} I\n")
    plan = plan_of(tmp_path, sql)
    fragment = next(f for f in ("I.NoSuch", "i.nosuch", "`I`.`NoSuch`") if f in plan.sql)
    err = analysis_error(unresolved("`I`.`NoSuch`", plan.sql, fragment), plan)
    assert err.diagnostics[0].location == Location("models/m.sql", 3, 3)


def test_without_a_query_context_the_name_in_the_parameters_is_found(tmp_path):
    sql = ("{{ config(materialized='table') }}\n"
           "SELECT i.req_id,\n       nofunc(i.ad_id) AS f\n"
           "FROM {{ source('ods', 'imps') }} AS i\n")
    plan = plan_of(tmp_path, sql)
    exc = FakeAnalysisException(
        "UNRESOLVED_ROUTINE", {"routineName": "`NOFUNC`", "searchPath": "[`system`.`builtin`]"},
        "[UNRESOLVED_ROUTINE] Cannot resolve routine `NOFUNC` on search path [`system`.`builtin`]. "
        "SQLSTATE: 42883")
    (diag,) = analysis_error(exc, plan).diagnostics
    assert diag.location == Location("models/m.sql", 3, 8)
    assert diag.message == "model `m`: function `nofunc` does not exist"
    assert "udfs/" in diag.hint


def test_a_delta_rule_statement_repeating_the_model_maps_each_copy_to_the_model(tmp_path):
    sql = "SELECT i.req_id, nosuch FROM {{ source('ods', 'imps') }} AS i\nWHERE nosuch > 0"
    plan = plan_of(tmp_path, sql)
    doubled = dataclasses.replace(plan, sql=f"{plan.sql}\nUNION ALL\n{plan.sql}")
    for nth, want in ((0, (1, 18)), (1, (2, 7)), (2, (1, 18)), (3, (2, 7))):
        err = analysis_error(unresolved("`nosuch`", doubled.sql, "nosuch", nth=nth), doubled)
        assert err.diagnostics[0].location == Location("models/m.sql", *want)


def test_an_error_in_the_hash_join_form_is_located_by_that_sql(tmp_path):
    """A small micro-batch runs the plan's hash-join form (hints added to the delta rule's
    statement): Spark's fragment offsets are in that SQL, and each term's copy maps to the model."""
    sql = ("{{ config(materialized='streaming_table') }}\n"
           "SELECT i.req_id, c.nosuch FROM {{ source('ods', 'imps') }} AS i\n"
           "JOIN {{ source('ods', 'clicks') }} AS c ON i.req_id = c.req_id\n"
           "  AND c.click_ts BETWEEN i.imp_ts AND i.imp_ts + INTERVAL 20 MINUTES\n"
           "WHERE c.nosuch > 0")
    plan = plan_of(tmp_path, sql, mode="stream")
    hashed = plan.hash_join_sql
    assert hashed is not None and hashed != plan.sql
    for nth, want in ((0, (2, 18)), (1, (5, 7)), (2, (2, 18)), (3, (5, 7))):
        exc = unresolved("`c`.`nosuch`", hashed, "c.nosuch", nth=nth)
        with pytest.raises(SqlflowError) as err:
            with model_errors(plan, hashed):
                raise exc
        assert err.value.diagnostics[0].location == Location("models/m.sql", *want), nth


def test_what_cannot_be_located_gives_none_and_model_errors_lets_the_original_through(tmp_path):
    plan = plan_of(tmp_path, "SELECT i.req_id FROM {{ source('ods', 'imps') }} AS i")
    gone = unresolved("`elsewhere`", "SELECT elsewhere FROM v", "elsewhere")
    assert analysis_error(gone, plan) is None  # not in the model: no guess
    assert analysis_error(gone, dataclasses.replace(plan, source_map=None)) is None
    assert analysis_error(ValueError("not spark"), plan) is None
    with pytest.raises(FakeAnalysisException):
        with model_errors(plan):
            raise gone
    with pytest.raises(ValueError):
        with model_errors(plan):
            raise ValueError("not spark")


def test_model_errors_turns_a_located_error_into_a_sqlflow_error(tmp_path):
    plan = plan_of(tmp_path, "SELECT i.req_id,\n  i.nosuch FROM {{ source('ods', 'imps') }} AS i")
    exc = unresolved("`i`.`nosuch`", plan.sql, "i.nosuch")
    with pytest.raises(SqlflowError) as err:
        with model_errors(plan):
            raise exc
    assert err.value.__cause__ is exc
    assert str(err.value).startswith("models/m.sql:2:3: error: model `m`: column `i`.`nosuch` does not exist; "
                                     "Spark suggests")


def test_a_context_inside_a_view_or_a_dataframe_is_not_used():
    exc = FakeAnalysisException("UNRESOLVED_COLUMN.WITHOUT_SUGGESTION", {"objectName": "`x`"}, "m",
                                (FakeContext("x", 3, object_type="VIEW"), FakeContext("y", 5, Kind.DataFrame)))
    problem = problem_of(exc)
    assert (problem.fragment, problem.start) == (None, None)
    assert problem.params == {"objectName": "`x`"}


def test_stream_plans_are_located_too(tmp_path):
    sql = ("{{ config(materialized='streaming_table', partition_by=['dt']) }}\n"
           "SELECT i.req_id, to_date(i.imp_ts) AS dt,\n"
           "       i.nosuch\n"
           "FROM {{ source('ods', 'imps') }} AS i\n")
    plan = plan_of(tmp_path, sql, mode="stream")
    assert plan.mode == "stream"
    (diag,) = analysis_error(unresolved("`i`.`nosuch`", plan.sql, "i.nosuch"), plan).diagnostics
    assert diag.location == Location("models/m.sql", 3, 8)
    assert "target/sqlflow/stream/m.sql" in diag.hint


@pytest.mark.parametrize("condition,params,message,want", [
    ("UNRESOLVED_COLUMN.WITHOUT_SUGGESTION", {"objectName": "`a`"}, "",
     ("column `a` does not exist", "check the name against the columns")),
    ("TABLE_OR_VIEW_NOT_FOUND", {"relationName": "`db`.`t`"}, "",
     ("table `db`.`t` does not exist", "read models with {{ ref('model') }}")),
    ("WRONG_NUM_ARGS.WITHOUT_SUGGESTION", {"functionName": "`substring`", "expectedNum": "[2, 3]",
                                           "actualNum": "1"}, "",
     ("`substring` takes [2, 3] arguments, not 1", "fix the arguments")),
    ("DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES", {},
     "[DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES] Cannot resolve \"(a + b)\" due to data type mismatch: "
     "the left and right operands have different types.\nmore. SQLSTATE: 42K09",
     ("type mismatch: Cannot resolve \"(a + b)\" due to data type mismatch: the left and right "
      "operands have different types.", "cast the argument")),
    ("MISSING_GROUP_BY", {}, "[MISSING_GROUP_BY] The query does not include a GROUP BY clause. "
     "SQLSTATE: 42803", ("The query does not include a GROUP BY clause.", "fix the SQL")),
])
def test_messages_are_plain_words(condition, params, message, want):
    got = explain(SparkProblem(condition, params, message))
    assert got[0] == want[0] and got[1].startswith(want[1])


def test_a_function_name_reads_as_the_model_spells_it():
    problem = SparkProblem("UNRESOLVED_ROUTINE", {"routineName": "`NO_SUCH_UDF`"}, "")
    assert explain(problem, "no_such_udf")[0] == "function `no_such_udf` does not exist"
    assert explain(problem, "other")[0] == "function `NO_SUCH_UDF` does not exist"


def test_find_in_model_gives_none_for_sql_it_cannot_tokenize():
    problem = SparkProblem("X", {}, "", "a", 0)
    assert find_in_model(problem, "SELECT 'unterminated", "SELECT a") is None


def test_the_source_map_stays_out_of_artifacts_and_plan_equality(tmp_path):
    plan = plan_of(tmp_path, "SELECT i.req_id FROM {{ source('ods', 'imps') }} AS i")
    assert plan.source_map is not None
    data = json.loads(plan_json_text(plan, None))
    assert "source_map" not in data and data["model"] == "m"
    assert plan == dataclasses.replace(plan, source_map=None)
    assert "source_map" not in repr(plan)
