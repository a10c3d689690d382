"""The Connect client's protobuf DecodeError (a too deeply nested expression) reaches the user
as the Connect limit it is, with the alternative, not as a traceback (no JVM, no server)."""

from __future__ import annotations

import click
from click.testing import CliRunner
from google.protobuf.message import DecodeError

from sqlflow.cli.support import error_handler


@click.command()
@click.option("--debug", is_flag=True)
@error_handler
def _raises(debug: bool) -> None:
    raise DecodeError("Error parsing message with type 'spark.connect.Expression'")


def test_a_decode_error_is_one_line_with_the_reason_and_the_alternative():
    done = CliRunner().invoke(_raises, [])
    assert done.exit_code == 1, done.output
    assert "cannot run over Spark Connect" in done.output and "`cluster` target" in done.output
    assert "Traceback" not in done.output


def test_other_errors_are_not_taken_for_it():
    @click.command()
    @error_handler
    def boom() -> None:
        raise ValueError("something else")

    done = CliRunner().invoke(boom, [])
    assert isinstance(done.exception, ValueError)
