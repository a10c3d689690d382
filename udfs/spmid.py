"""SPM id parsing. An spmid is `department.page.module.position`, e.g. `live.room.gift.3`.

Production spmids are dirty: missing parts, empty parts, stray whitespace, upper case. A
value that does not have four non-empty dot-separated parts parses to NULL fields, so a
routing model can send it to quarantine instead of inventing a department.
"""

from __future__ import annotations

import re

from sqlflow.engine.udfs import sql_function

_PART = re.compile(r"^[a-z0-9_\-]+$")

SPMID_TYPE = "struct<department:string,page:string,module:string,position:string>"


def split_spmid(spmid: str | None) -> tuple[str, str, str, str] | None:
    """The four parts of a well-formed spmid, lower-cased and stripped, else None."""
    if spmid is None:
        return None
    parts = [p.strip().lower() for p in str(spmid).strip().split(".")]
    if len(parts) != 4 or not all(_PART.match(p) for p in parts):
        return None
    return parts[0], parts[1], parts[2], parts[3]


@sql_function(SPMID_TYPE)
def parse_spmid(spmid):
    """`parse_spmid(spmid)` -> struct(department, page, module, position); NULL fields if bad."""
    parts = split_spmid(spmid)
    if parts is None:
        return (None, None, None, None)
    return parts


@sql_function("string")
def spmid_department(spmid):
    """`spmid_department(spmid)` -> the department, or NULL for a malformed spmid."""
    parts = split_spmid(spmid)
    return parts[0] if parts else None
