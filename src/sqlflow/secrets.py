"""Secret environment variables, as dbt treats them (docs/deploy.md, "Secrets").

A variable whose name starts with `DBT_ENV_SECRET_` (or a prefix listed, comma-separated, in
`SQLFLOW_SECRET_ENV_PREFIXES`) is a secret: `env_var()` reads it in profiles only (a model,
macro or sources.yml asking for it is an error), and its value is replaced by `*****` in every
message, `--debug` trace, log record and compiled artefact sqlflow writes.
"""

from __future__ import annotations

import logging
import os

from sqlflow.errors import SqlflowError

DEFAULT_PREFIXES = ("DBT_ENV_SECRET_",)
PREFIXES_VAR = "SQLFLOW_SECRET_ENV_PREFIXES"
MASK = "*****"


def prefixes() -> tuple[str, ...]:
    """The secret name prefixes: dbt's, plus those listed in SQLFLOW_SECRET_ENV_PREFIXES."""
    extra = [p.strip() for p in os.environ.get(PREFIXES_VAR, "").split(",") if p.strip()]
    return (*DEFAULT_PREFIXES, *extra)


def is_secret(name: str) -> bool:
    return name.startswith(prefixes())


def secret_values() -> list[str]:
    """The values of the secret variables set now, longest first (so none is masked half)."""
    values = {v for k, v in os.environ.items() if is_secret(k) and v}
    return sorted(values, key=len, reverse=True)


def mask(text: str) -> str:
    """`text` with every secret value replaced by `*****`."""
    for value in secret_values():
        text = text.replace(value, MASK)
    return text


def mask_exception(exc: BaseException) -> BaseException:
    """Mask the message (and a SqlflowError's diagnostics) of `exc` in place; returns it."""
    import dataclasses

    exc.args = tuple(mask(a) if isinstance(a, str) else a for a in exc.args)
    if isinstance(exc, SqlflowError):
        exc.diagnostics = [dataclasses.replace(d, message=mask(d.message), hint=mask(d.hint))
                           for d in exc.diagnostics]
    return exc


_installed = False


def install_log_masking() -> None:
    """Mask secrets in every log record of sqlflow's loggers (`sqlflow.*`; idempotent). A
    record factory, since a logger's filters do not apply to its children's records."""
    global _installed
    if _installed:
        return
    make = logging.getLogRecordFactory()

    def masked(*args, **kwargs) -> logging.LogRecord:
        record = make(*args, **kwargs)
        if record.name.split(".")[0] == "sqlflow" and secret_values():
            record.msg, record.args = mask(record.getMessage()), ()
        return record

    logging.setLogRecordFactory(masked)
    _installed = True
