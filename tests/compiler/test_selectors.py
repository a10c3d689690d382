"""dbt's node selection grammar (`--select`, `--exclude`), form by form, without a JVM.

The expected sets follow dbt-core's semantics (dbt/graph/selector_methods.py, selector.py);
`tests/compiler/test_selectors_dbt.py` asks real `dbt ls` the same cases, --exclude too.
"""

from __future__ import annotations

import pytest

from helpers import make_project, make_target
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.project.selector_spec import parse_criterion
from sqlflow.rendering.render import render_project

#      ods.a -> stg_a -> int_ab -> mart -> fin
#      ods.b -> stg_b ----^          other (no deps)
MODELS = {
    "staging/stg_a.sql": "{{ config(tags=['stg']) }}select * from {{ source('ods', 'a') }}",
    "staging/stg_b.sql": "{{ config(tags=['stg', 'b']) }}select * from {{ source('ods', 'b') }}",
    "intermediate/int_ab.sql": "{{ config(materialized='table', meta={'owner': 'ana'}) }}"
                               "select * from {{ ref('stg_a') }} join {{ ref('stg_b') }}",
    "marts/mart.sql": "{{ config(materialized='table', file_format='parquet') }}"
                      "select * from {{ ref('int_ab') }}",
    "marts/finance/fin.sql": "{{ config(materialized='table', tags=['nightly']) }}"
                             "select * from {{ ref('mart') }}",
    "marts/other.sql": "{{ config(enabled=true, tags=['nightly']) }}select 1",
}
SOURCES = {"sources.yml": "version: 2\nsources:\n  - name: ods\n    tables:\n"
                          "      - name: a\n      - name: b\n"}
CASES = [
    # names and graph operators
    ("int_ab", ["int_ab"]),
    ("+int_ab", ["stg_a", "stg_b", "int_ab"]),
    ("int_ab+", ["int_ab", "mart", "fin"]),
    ("1+mart", ["int_ab", "mart"]),
    ("stg_a+1", ["stg_a", "int_ab"]),
    ("2+fin", ["int_ab", "mart", "fin"]),
    ("stg_a+2", ["stg_a", "int_ab", "mart"]),
    ("@stg_b", ["stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("@mart", ["stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("@fin", ["stg_a", "stg_b", "int_ab", "mart", "fin"]),
    # folders (fqn), wildcards, the package
    ("staging", ["stg_a", "stg_b"]),
    ("staging.*", ["stg_a", "stg_b"]),
    ("marts", ["other", "mart", "fin"]),
    ("marts.finance", ["fin"]),
    ("marts.finance.fin", ["fin"]),
    ("testproj.marts.finance", ["fin"]),
    ("stg_*", ["stg_a", "stg_b"]),
    ("*_b", ["stg_b"]),
    ("marts.f*", ["fin"]),
    ("package:testproj", ["other", "stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("package:this", ["other", "stg_a", "stg_b", "int_ab", "mart", "fin"]),
    # paths and files
    ("path:models/marts", ["other", "mart", "fin"]),
    ("models/marts/finance", ["fin"]),
    ("path:models/staging/stg_b.sql", ["stg_b"]),
    ("path:models/*/stg_a.sql", ["stg_a"]),
    ("models/staging/", ["stg_a", "stg_b"]),
    ("stg_b.sql", ["stg_b"]),
    ("file:fin", ["fin"]),
    # tags, config, resource types, sources
    ("tag:stg", ["stg_a", "stg_b"]),
    ("tag:b+", ["stg_b", "int_ab", "mart", "fin"]),
    ("tag:night*", ["other", "fin"]),
    ("config.materialized:table", ["int_ab", "mart", "fin"]),
    ("config.materialized:view", ["other", "stg_a", "stg_b"]),
    ("config.file_format:parquet", ["mart"]),
    ("config.meta.owner:ana", ["int_ab"]),
    ("config.tags:nightly", ["other", "fin"]),
    ("config.enabled:true", ["other", "stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("resource_type:model", ["other", "stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("source:ods+", ["stg_a", "stg_b", "int_ab", "mart", "fin"]),
    ("source:ods.b+1", ["stg_b"]),
    ("source:ods.*+1", ["stg_a", "stg_b"]),
    # union (arguments and spaces), intersection (commas)
    (["other", "stg_a"], ["other", "stg_a"]),
    ("other stg_a", ["other", "stg_a"]),
    ("tag:stg,tag:b", ["stg_b"]),
    ("+mart,staging", ["stg_a", "stg_b"]),
    ("marts,config.materialized:table fin", ["mart", "fin"]),
    ("int_ab+,tag:nightly", ["fin"]),
]


@pytest.fixture(scope="module")
def dag(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("sel"), models=MODELS, yml=SOURCES)
    return render_project(load_project(root), make_target()).dag


@pytest.mark.parametrize("selector, expected", CASES, ids=lambda c: str(c))
def test_select(dag, selector, expected):
    assert dag.select(selector) == tuple(n for n in dag.order if n in expected)
    assert set(dag.select(selector)) == set(expected)


EXCLUDES = [
    (None, "marts", ["stg_a", "stg_b", "int_ab"]),
    ("+fin", "stg_a+1", ["stg_b", "mart", "fin"]),
    ("staging+", "tag:nightly config.materialized:table", ["stg_a", "stg_b"]),
    ("tag:stg", "tag:stg,tag:b", ["stg_a"]),
    ("@mart", "@mart", []),
]


@pytest.mark.parametrize("select, exclude, expected", EXCLUDES)
def test_exclude(dag, select, exclude, expected):
    assert set(dag.select(select, exclude)) == set(expected)


@pytest.mark.parametrize("selector, message", [
    ("int_abc", "--select `int_abc`: no model named `int_abc`; did you mean `int_ab`?"),
    ("zzz.*", "no model named `zzz.*`; the project has: `fin`, `int_ab`, `intermediate`, "
                 "`mart`, `marts`, `marts.finance`, `other`, `staging`, `stg_a`, `stg_b`"),
    ("tag:stgg", "--select `tag:stgg`: no model has tag `stgg`; did you mean `stg`?"),
    ("path:models/mart", "no model file under `models/mart`; did you mean `models/marts`?"),
    ("config.materialized:incremental",
     "no model has config `materialized` = `incremental`; the project has: `table`, `view`"),
    ("resource_type:snapshot", "the project has no node of type `snapshot`; the project has: "
                               "`model`, `source`"),
    ("resource_type:modle", "`modle` is not a dbt resource type; did you mean `model`?"),
    ("source:odz", "no source named `odz`; the project has: `ods.a`, `ods.b`"),
    ("tags:stg", "unknown selector method `tags:`; did you mean `tag`?"),
    ("config:view", "`config:` needs the key to compare"),
    ("@mart+", "the `@` prefix and a `+` suffix cannot be combined"),
    ("+", "not a selector (no value to search for)"),
])
def test_select_errors(dag, selector, message):
    with pytest.raises(SqlflowError) as err:
        dag.select(selector)
    assert message in str(err.value)


def test_exclude_that_matches_nothing_is_an_error(dag):
    with pytest.raises(SqlflowError, match="--exclude `stg_c`: no model named `stg_c`"):
        dag.select(None, "stg_c")


def test_parse_depths_and_methods():
    c = parse_criterion("3+config.meta.owner:ana+2")
    assert (c.method, c.args, c.value) == ("config", ("meta", "owner"), "ana")
    assert (c.parents, c.parents_depth, c.children, c.children_depth) == (True, 3, True, 2)
    assert parse_criterion("models\\staging").method == "path"
    assert parse_criterion("x.py").method == "file"
