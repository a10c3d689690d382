"""Where a node of the rendered SQL is, as a `Location` in the model file.

sqlglot keeps `start`/`end` character offsets in `meta` of identifiers and functions (see
`sqlflow.dialect`); a node without its own takes the earliest offset in its subtree, or its
parent's. Keywords (`GROUP BY`, `ORDER BY`, `LIMIT`, `DISTINCT`) have no node, so they are
found in the token stream just before the node they introduce.

    >>> from sqlflow.dialect import parse
    >>> sql = "SELECT a\\nFROM t\\nORDER BY  a"
    >>> pos = Positions(sql, "models/x.sql")
    >>> order = parse(sql).args["order"]
    >>> str(pos.of(order)), str(pos.keyword(pos.start(order), "ORDER_BY"))
    ('models/x.sql:3:11', 'models/x.sql:3:1')
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from sqlglot import exp
from sqlglot.tokens import Token

from sqlflow.dialect import DIALECT
from sqlflow.errors import Location

_JOIN_WORDS = {"JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "SEMI", "ANTI", "NATURAL"}


class Positions:
    """Offsets of the rendered SQL -> `Location` via the renderer's source map (`locate`)."""

    def __init__(
        self,
        sql: str,
        path: str,
        locate: Callable[[int, int], Location] | None = None,
        tokens: list[Token] | None = None,
    ) -> None:
        self.sql = sql
        self.path = path
        self.locate = locate
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(sql) if ch == "\n"]
        self._tokens = tokens

    def start(self, node: exp.Expr | None) -> int | None:
        """Offset of the first character of `node` in the rendered SQL, if known."""
        while node is not None:
            starts = [n.meta["start"] for n in node.walk() if "start" in n.meta]
            if starts:
                return min(starts)
            node = node.parent
        return None

    def at(self, offset: int) -> Location:
        line = bisect.bisect_right(self._line_starts, offset)
        col = offset - self._line_starts[line - 1] + 1
        if self.locate is not None:
            return self.locate(line, col)
        return Location(self.path, line, col)

    def of(self, node: exp.Expr | None) -> Location:
        offset = self.start(node)
        return self.at(offset) if offset is not None else Location(self.path)

    def text(self, node: exp.Expr) -> str:
        """The node's own token as written (a function's name in the user's spelling)."""
        meta = node.meta
        if "start" in meta and "end" in meta:
            return self.sql[meta["start"] : meta["end"] + 1]
        return node.sql(dialect=DIALECT)

    def _token_list(self) -> list[Token]:
        if self._tokens is None:
            self._tokens = DIALECT().tokenize(self.sql)
        return self._tokens

    def join_keyword(self, source_start: int, *, parenthesized: bool = False) -> Location:
        """Where the `[LEFT|...] JOIN` that introduces the source starting at `source_start`
        begins; for a `(subquery)` source, the JOIN before its opening parenthesis."""
        tokens = self._token_list()
        i = next((k for k, tok in enumerate(tokens) if tok.start >= source_start), len(tokens)) - 1
        depth = 0
        while parenthesized and i >= 0:
            name = tokens[i].token_type.name
            if name == "L_PAREN" and depth == 0 and i > 0 and tokens[i - 1].token_type.name in _JOIN_WORDS:
                i -= 1
                break
            if name == "R_PAREN":
                depth += 1
            elif name == "L_PAREN" and depth > 0:
                depth -= 1
            i -= 1
        first = None
        while i >= 0 and tokens[i].token_type.name in _JOIN_WORDS:
            first, i = tokens[i], i - 1
        return self.at(first.start if first is not None else source_start)

    def keyword(self, before: int | None, *token_types: str) -> Location | None:
        """The last keyword token of one of `token_types` that starts before `before`."""
        if before is None:
            return None
        best = None
        for token in self._token_list():
            if token.start >= before:
                break
            if token.token_type.name in token_types:
                best = token
        return self.at(best.start) if best is not None else None
