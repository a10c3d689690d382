"""DAG: topological order, --select, cycles reported with the whole path."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import make_project, make_target
from sqlflow.errors import SqlflowError
from sqlflow.project.dag import build_dag
from sqlflow.project.load import load_project
from sqlflow.rendering.render import render_project

#      src -> stg_a -> int_ab -> mart
#      src -> stg_b ----^
#             other (no deps)
MODELS = {
    "staging/stg_a.sql": "{{ config(tags=['stg']) }}select * from {{ source('ods', 'a') }}",
    "staging/stg_b.sql": "{{ config(tags=['stg', 'b']) }}select * from {{ source('ods', 'b') }}",
    "intermediate/int_ab.sql": "select * from {{ ref('stg_a') }} join {{ ref('stg_b') }}",
    "marts/mart.sql": "select * from {{ ref('int_ab') }}",
    "marts/other.sql": "select 1",
}
SOURCES = {"sources.yml": "version: 2\nsources:\n  - name: ods\n    tables:\n"
                          "      - name: a\n      - name: b\n"}


@pytest.fixture
def dag(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml=SOURCES)
    return render_project(load_project(root), make_target()).dag


def test_topological_order_and_edges(dag):
    assert dag.order == ("other", "stg_a", "stg_b", "int_ab", "mart")
    assert dag.parents["int_ab"] == ("stg_a", "stg_b")
    assert dag.children["stg_a"] == ("int_ab",)
    assert dag.sources["stg_a"] == ("ods.a",)
    assert dag.ancestors("mart") == {"int_ab", "stg_a", "stg_b"}
    assert dag.descendants("stg_b") == {"int_ab", "mart"}


@pytest.mark.parametrize("selector, expected", [
    ("int_ab", ("int_ab",)),
    ("+int_ab", ("stg_a", "stg_b", "int_ab")),
    ("stg_a+", ("stg_a", "int_ab", "mart")),
    ("+int_ab+", ("stg_a", "stg_b", "int_ab", "mart")),
    ("tag:stg", ("stg_a", "stg_b")),
    ("tag:b+", ("stg_b", "int_ab", "mart")),
    ("path:models/marts", ("other", "mart")),
    ("models/staging/stg_b.sql", ("stg_b",)),
    (["other", "stg_a"], ("other", "stg_a")),
    ("other stg_a", ("other", "stg_a")),
    (None, ("other", "stg_a", "stg_b", "int_ab", "mart")),
])
def test_select(dag, selector, expected):
    assert dag.select(selector) == expected


@pytest.mark.parametrize("selector, message", [
    ("int_abc", "--select `int_abc`: no model named `int_abc`; did you mean `int_ab`?"),
    ("tag:stgg", "--select `tag:stgg`: no model has tag `stgg`; did you mean `stg`?"),
    ("path:models/mart", "no model file under `models/mart`; did you mean `models/marts`?"),
    ("fqm:x", "--select `fqm:x`: unknown selector method `fqm:`; did you mean `fqn`?"),
])
def test_select_errors(dag, selector, message):
    with pytest.raises(SqlflowError) as err:
        dag.select(selector)
    assert message in str(err.value)


def test_render_project_select_keeps_order(tmp_path):
    root = make_project(tmp_path, models=MODELS, yml=SOURCES)
    result = render_project(load_project(root), make_target(), select=["+mart"])
    assert result.order == ("stg_a", "stg_b", "int_ab", "mart")
    assert len(result.dag.order) == 5


def test_cycle_prints_the_whole_path_with_files(tmp_path):
    root = make_project(tmp_path, models={
        "a.sql": "select * from {{ ref('c') }}", "sub/b.sql": "select * from {{ ref('a') }}",
        "c.sql": "select * from {{ ref('b') }}", "d.sql": "select * from {{ ref('a') }}"})
    with pytest.raises(SqlflowError) as err:
        render_project(load_project(root), make_target())
    assert str(err.value) == (
        "models/a.sql: error: models ref each other in a cycle: a (models/a.sql) -> "
        "c (models/c.sql) -> b (models/sub/b.sql) -> a (models/a.sql); "
        "each arrow is a ref(); remove one of them to break the cycle")


def test_self_ref_is_a_cycle(tmp_path):
    root = make_project(tmp_path, models={"a.sql": "select * from {{ ref('a') }}"})
    with pytest.raises(SqlflowError, match=r"cycle: a \(models/a.sql\) -> a \(models/a.sql\)"):
        render_project(load_project(root), make_target())


class _Node:
    def __init__(self, name, refs):
        self.name, self.path, self.refs, self.sources = name, f"models/{name}.sql", refs, ()
        self.config = type("C", (), {"tags": []})()


@given(st.integers(min_value=1, max_value=25).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))))
def test_order_respects_every_edge_of_a_random_dag(graph):
    n, pairs = graph
    # only edges from a higher to a lower index: acyclic by construction
    refs = {i: sorted({f"m{j:02d}" for k, j in pairs if k == i and j < i}) for i in range(n)}
    dag = build_dag([_Node(f"m{i:02d}", refs[i]) for i in reversed(range(n))])
    position = {name: i for i, name in enumerate(dag.order)}
    assert len(dag.order) == n
    for i in range(n):
        for parent in refs[i]:
            assert position[parent] < position[f"m{i:02d}"]
