"""The Jinja sandbox refuses known template-injection payloads (docs/semantics.md, the sandbox).

Each payload, adapted from the public SSTI literature to what sqlflow exposes, sits on line 3 of
a model. Rendering must fail with an error at `models/m.sql:3`, and the payload's side effect
(a canary file it would create, a secret file it would read) must not have happened.
"""

from __future__ import annotations

import pytest

from helpers import make_project, make_target
from sqlflow.errors import SqlflowError
from sqlflow.project.load import load_project
from sqlflow.rendering.render import render_project

SECRET = "TOPSECRET-9f3a"

# {cmd} runs `touch <canary>`; {file} is a file holding SECRET.
PAYLOADS = [
    "{{ modules.datetime.sys.modules['os'].popen('{cmd}').read() }}",
    "{{ modules.datetime.sys.modules['os'].system('{cmd}') }}",
    "{{ modules.datetime.sys.modules['builtins'].open('{file}').read() }}",
    "{{ modules.re.sys.modules['subprocess'].check_output('{cmd}', shell=True) }}",
    "{{ modules.re.enum.sys.modules['os'].system('{cmd}') }}",
    "{{ modules.itertools.__spec__.loader }}",
    "{{ modules.os.system('{cmd}') }}",
    "{{ modules.datetime.datetime.now.__self__.__module__ }}",
    "{{ modules.re.compile.__globals__['_sre'] }}",
    "{{ modules.re.compile.__globals__.__builtins__.open('{file}').read() }}",
    "{{ modules.re.compile('x').__class__.__mro__ }}",
    "{{ modules.re.match('a', 'a').re.__class__ }}",
    "{{ modules.re.sub('a', cycler.__init__, 'a') }}",
    "{{ modules.itertools.starmap(cycler.__init__.__globals__.os.system, [['{cmd}']]) | list }}",
    "{{ cycler.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ lipsum.__globals__['os'].popen('{cmd}').read() }}",
    "{{ lipsum.__globals__.__builtins__.open('{file}').read() }}",
    "{{ lipsum.func_globals }}",
    "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ self.__init__.__globals__.__builtins__.__import__('os').popen('{cmd}').read() }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('{cmd}').read() }}",
    "{{ config.__class__.__init__.__globals__['os'].popen('{cmd}').read() }}",
    "{{ config.node.raw_sql }}",
    "{{ config.current }}",
    "{{ config.get.__self__.node }}",
    "{{ config.__dict__ }}",
    "{{ this.__dict__ }}",
    "{{ this.__class__.__init__.__globals__ }}",
    "{{ var.values }}",
    "{{ var.__call__.__globals__['os'].environ }}",
    "{{ env_var.__globals__['os'].popen('{cmd}').read() }}",
    "{{ env_var.__globals__.os.environ }}",
    "{{ exceptions.raise_compiler_error.__globals__['os'].system('{cmd}') }}",
    "{{ log.__globals__.os.system('{cmd}') }}",
    "{{ target.__class__.__mro__ }}",
    "{{ model.config.__class__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''.__class__.mro()[1].__subclasses__() }}",
    "{{ dict.mro() }}",
    "{{ dict.__base__.__subclasses__() }}",
    "{{ ''.join.__self__.__class__ }}",
    "{{ [].pop.__self__.__class__.__base__ }}",
    "{% for c in ().__class__.__base__.__subclasses__() %}{{ c('{cmd}', shell=True) }}{% endfor %}",
    "{{ ()|attr('__class__')|attr('__base__')|attr('__subclasses__')() }}",
    "{{ cycler|attr('__init__')|attr('__globals__') }}",
    "{{ cycler.__init__|attr('__globals__') }}",
    "{{ ''|attr('\\x5f\\x5fclass\\x5f\\x5f') }}",
    "{{ request|attr('application')|attr('\\x5f\\x5fglobals\\x5f\\x5f') }}",
    "{{ [cycler]|map(attribute='__init__')|map(attribute='__globals__')|list }}",
    "{{ [cycler]|sort(attribute='__init__.__globals__')|first }}",
    "{{ '{0.__class__}'.format(cycler) }}",
    "{{ '{0.__init__.__globals__[os]}'.format(cycler) }}",
    "{{ '{x.__init__.__globals__}'.format_map({'x': cycler}) }}",
    "{{ '%s' % cycler.__init__.__globals__ }}",
    "{% set ns = namespace() %}{% set ns.f = cycler.__init__ %}{{ ns.f.__globals__ }}",
    "{% macro m() %}{% endmacro %}{{ m._func.__globals__ }}",
    "{% macro m() %}{% endmacro %}{{ m.__call__.__globals__ }}",
    "{{ joiner().__class__.__call__.__globals__ }}",
    "{{ cycler('a').next.__func__.__globals__ }}",
    "{% include '{file}' %}",
    "{% import '{file}' as x %}{{ x }}",
    "{% from '{file}' import y %}{{ y }}",
    "{% extends '{file}' %}",
    "{{ getattr(cycler, '__init__') }}",
    "{{ __builtins__.open('{file}').read() }}",
    "{{ range.__init__.__globals__ }}",
    # what dbt's context adds (sqlflow.rendering.adapter, packages)
    "{{ adapter.runtime.renderer.project.root }}",
    "{{ adapter.dispatch('date_trunc', 'dbt').runtime.context }}",
    "{{ adapter.dispatch.__self__.runtime }}",
    "{{ adapter.dispatch.__func__.__globals__['os'].system('{cmd}') }}",
    "{{ dbt.date_trunc.runtime.renderer }}",
    "{{ dbt.date_trunc.__call__.__globals__ }}",
    "{{ dbt.__dict__ }}",
    "{{ api.Column.translate_type.__func__.__globals__ }}",
    "{{ api.Column.__class__.__mro__ }}",
    "{{ adapter.behavior.enable_truthy_nulls_equals_macro.__class__ }}",
    "{{ run_started_at.__class__.__mro__ }}",
    "{{ adapter.dispatch('system', 'os')('{cmd}') }}",
]


@pytest.fixture
def outside(tmp_path):
    """A folder outside the project: the canary a payload would create, a secret it would read."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(SECRET)
    return folder


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_is_refused_at_the_models_line(tmp_path, outside, payload):
    canary = outside / "canary"
    text = payload.replace("{cmd}", f"touch {canary}").replace("{file}", str(outside / "secret.txt"))
    root = make_project(tmp_path / "proj", models={
        "m.sql": "select 1 as a\n-- line two\n, '" + text + "' as b\n",
        "other.sql": "select 2 as a\n",
    })
    with pytest.raises(SqlflowError) as err:
        # every model is rendered for the DAG, whichever one is selected
        render_project(load_project(root), make_target(), select="other")
    message = str(err.value)
    assert "models/m.sql:3" in message, message
    assert not canary.exists(), "the payload ran a command"
    assert SECRET not in message


def test_dbt_documented_modules_still_work(tmp_path):
    root = make_project(tmp_path, models={"m.sql": (
        "select '{{ modules.datetime.datetime(2024, 1, 2).strftime('%Y') }}' as y,"
        " '{{ modules.re.sub('a+', 'b', 'caab') }}' as r,"
        " '{{ modules.itertools.chain([1], [2]) | list | join(',') }}' as c,"
        " '{{ (modules.datetime.date(2024, 1, 2) + modules.datetime.timedelta(days=1)).isoformat() }}' as d")})
    sql = render_project(load_project(root), make_target()).models["m"].sql
    assert "'2024' as y" in sql and "'cbb' as r" in sql and "'1,2' as c" in sql
    assert "'2024-01-03' as d" in sql


def test_modules_holds_no_module_object():
    import types

    from sqlflow.sandbox import MODULES

    for group in vars(MODULES).values():
        assert not isinstance(group, types.ModuleType)
        for value in vars(group).values():
            assert not isinstance(value, types.ModuleType)


def test_profiles_are_rendered_in_the_sandbox(tmp_path, outside):
    from sqlflow.project.profiles import load_target

    canary = outside / "canary"
    profiles = f"""\
        default:
          target: local
          outputs:
            local:
              type: spark
              method: session
              schema: "{{{{ cycler.__init__.__globals__.os.system('touch {canary}') }}}}"
        """
    root = make_project(tmp_path / "proj", profiles_yml=profiles)
    with pytest.raises(SqlflowError):
        load_target(root, "default")
    assert not canary.exists()
