"""The Spark SQL dialect sqlflow parses models with: sqlglot's Spark, plus source positions.

sqlglot records `line`/`col`/`start`/`end` in `expression.meta` for identifiers and for
functions called with parentheses, but not for functions spelled without them
(`current_timestamp`, `current_date`). Every stream-safety error must name a line and column,
so the parser of this subclass stamps the position of the function's token on those too.
Generation is unchanged: `ast.sql(dialect="spark")` and `ast.sql(dialect=SqlflowSpark)` agree.

A multi-unit interval literal is read as one parenthesized sum, so that every SQL generated from
the tree means what the analyst wrote (the pinned sqlglot builds the sum without its grouping,
and `t - INTERVAL 3 MINUTES 30 SECONDS` came back as `t - INTERVAL '3' MINUTES + INTERVAL '30'
SECONDS`, i.e. `t - 150 s`; docs/stack.md has the reproduction); later parts may carry their own
sign, as in Spark:

    >>> parse("SELECT t - INTERVAL 3 MINUTES 30 SECONDS").sql("spark")
    "SELECT t - (INTERVAL '3' MINUTES + INTERVAL '30' SECONDS)"
    >>> parse("SELECT t + INTERVAL 1 MINUTE -30 SECONDS").sql("spark")
    "SELECT t + (INTERVAL '1' MINUTE + INTERVAL '-30' SECONDS)"

    >>> from sqlflow.dialect import parse
    >>> node = parse("SELECT a,\\n  current_timestamp FROM t").expressions[1]
    >>> node.meta["line"], node.meta["start"]
    (2, 12)
    >>> parse("SELECT count(*) FROM t GROUP BY window(ts, '1 hour')").args["group"].sql("spark")
    "GROUP BY WINDOW(ts, '1 hour')"
"""

from __future__ import annotations

import typing as t

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import Token, TokenType

from sqlflow.errors import Location, SqlflowError


class SqlflowSpark(Spark):
    """Spark 3/4 SQL as sqlglot parses it, with positions on parenthesis-less functions, and
    `GROUP BY window(ts, '1 hour')` read as Spark reads it (sqlglot 30.30 stops a GROUP BY at a
    leading `window` token, taking it for a `WINDOW w AS (...)` clause)."""

    class Parser(SparkParser):  # Spark.Parser, which mypy sees only as a class attribute
        def _parse_function_call(self, *args: t.Any, **kwargs: t.Any) -> exp.Expr | None:
            token = self._curr
            node = super()._parse_function_call(*args, **kwargs)
            if node is not None and token is not None and "start" not in node.meta:
                node.update_positions(token)
            return node

        def _parse_group(self, skip_group_by_token: bool = False) -> exp.Group | None:
            first = self._index + (0 if skip_group_by_token else 1)
            ahead = [tok.token_type for tok in self._tokens[first : first + 2]]
            if ahead != [TokenType.WINDOW, TokenType.L_PAREN]:
                return super()._parse_group(skip_group_by_token)
            # Shadow the class set on this parser instance only, for this one clause.
            # sqlglot types it a ClassVar; the instance attribute shadows it on purpose
            without = type(self).QUERY_MODIFIER_TOKENS - {TokenType.WINDOW}
            self.QUERY_MODIFIER_TOKENS = without  # type: ignore[misc]
            try:
                return super()._parse_group(skip_group_by_token)
            finally:
                del self.QUERY_MODIFIER_TOKENS

        def _parse_interval(  # type: ignore[override]  # a multi-unit literal is one Paren, not an Add
                self, require_interval: bool = True, parse_function_unit: bool = True) -> exp.Expr | None:
            node = super()._parse_interval(require_interval, parse_function_unit)
            if not require_interval or node is None:
                return node  # a later part of a multi-unit literal: the first part groups them
            parts = [node]
            while self._signed_interval_part_ahead():
                self._advance()  # the `-`: it negates the value of this part only, as in Spark
                part = super()._parse_interval(False, parse_function_unit)
                if part is None:
                    break
                first = part
                while isinstance(first, exp.Add):
                    first = first.this
                if isinstance(first, exp.Interval) and isinstance(first.this, exp.Literal):
                    value = first.this.name
                    first.set("this", exp.Literal.string(value[1:] if value.startswith("-") else "-" + value))
                parts.append(part)
            if len(parts) == 1 and not isinstance(node, exp.Add):
                return node
            total = parts[0]
            for part in parts[1:]:
                total = exp.Add(this=total, expression=part)
            return self.expression(exp.Paren(this=total))

        def _signed_interval_part_ahead(self) -> bool:
            """`- 30 SECONDS` right after an interval literal: Spark reads it as one more part."""
            ahead = self._tokens[self._index : self._index + 3]
            return (len(ahead) == 3 and ahead[0].token_type == TokenType.DASH
                    and ahead[1].token_type in (TokenType.NUMBER, TokenType.STRING)
                    and ahead[2].text.upper() in _INTERVAL_PART_UNITS)


DIALECT = SqlflowSpark

# The units of Spark's multi-unit interval literal (`multiUnitsInterval`), singular and plural.
_INTERVAL_PART_UNITS = {u + s for u in ("YEAR", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND",
                                        "MILLISECOND", "MICROSECOND") for s in ("", "S")}


def parse(
    sql: str,
    *,
    path: str = "<sql>",
    locate: t.Callable[[int, int], Location] | None = None,
) -> exp.Expr:
    """Parse one rendered model statement; a syntax error becomes a `SqlflowError` at its place."""
    return parse_with_tokens(sql, path=path, locate=locate)[0]


def parse_with_tokens(
    sql: str,
    *,
    path: str = "<sql>",
    locate: t.Callable[[int, int], Location] | None = None,
) -> tuple[exp.Expr, list[Token]]:
    """`parse`, also returning the token stream (keyword positions come from it)."""
    dialect = DIALECT()
    try:
        tokens = dialect.tokenize(sql)
        statements = [s for s in dialect.parser().parse(tokens, sql) if s is not None]
    except (ParseError, TokenError) as err:
        raise _syntax_error(err, path, locate) from None
    _refuse_stray_commas(tokens, path, locate)
    if len(statements) != 1:
        raise SqlflowError(
            f"a model must be exactly one SELECT statement, found {len(statements)}",
            location=Location(path),
            hint="remove the extra statements (move setup into a pre-hook or a macro)",
        )
    return statements[0], tokens


# sqlglot drops a doubled or trailing comma (`a,, b`, `a, FROM`); Spark refuses both, so the
# plan would silently differ from the SQL the analyst wrote and dbt runs.
_NOT_AFTER_COMMA = {TokenType.COMMA, TokenType.FROM, TokenType.R_PAREN, TokenType.WHERE,
                    TokenType.GROUP_BY, TokenType.ORDER_BY, TokenType.SEMICOLON}


def _refuse_stray_commas(tokens: list[Token], path: str,
                         locate: t.Callable[[int, int], Location] | None) -> None:
    for comma, after in zip(tokens, tokens[1:] + [None], strict=True):
        if comma.token_type == TokenType.COMMA and (after is None or after.token_type in _NOT_AFTER_COMMA):
            where = locate(comma.line, comma.col) if locate else Location(path, comma.line, comma.col)
            follow = f"before `{after.text}`" if after is not None else "at the end"
            raise SqlflowError(f"SQL syntax error: stray comma {follow}", location=where,
                               hint="remove the comma, or add the missing expression after it")


def _syntax_error(
    err: Exception, path: str, locate: t.Callable[[int, int], Location] | None
) -> SqlflowError:
    details = getattr(err, "errors", None) or [{}]
    first = details[0]
    line, col = int(first.get("line") or 0), int(first.get("col") or 0)
    where = locate(line, col) if (locate and line) else Location(path, line, col)
    what = first.get("description") or str(err).splitlines()[0]
    near = first.get("highlight")
    message = f"SQL syntax error: {what}" + (f" near `{near}`" if near else "")
    return SqlflowError(message, location=where, hint="fix the SQL at that position")
