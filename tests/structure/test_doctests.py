"""Every docstring example in the package runs (walking the package, as sqlglot's suite
does): an example that no longer matches the code fails here."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import sqlflow

NAMES = sorted(m.name for m in pkgutil.walk_packages(sqlflow.__path__, "sqlflow."))
WITH_EXAMPLES = [n for n in NAMES
                 if doctest.DocTestFinder().find(importlib.import_module(n)) and any(
                     t.examples for t in doctest.DocTestFinder().find(importlib.import_module(n)))]


def test_the_package_has_examples() -> None:
    assert len(WITH_EXAMPLES) >= 4, WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS,
                             raise_on_error=False, report=True, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed (see above)"
