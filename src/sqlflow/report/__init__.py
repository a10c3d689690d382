"""What a user sees of a run: the runtime returns values, this package renders them (run and
stream summaries, progress lines, routed file budgets, `sqlflow status`). Nothing here
starts Spark work except `status`, which reads the commit log."""

from sqlflow.report.summary import (
                                    dims_table,
                                    event_line,
                                    files_table,
                                    progress_line,
                                    stream_table,
                                    summary_table,
)

__all__ = ["dims_table", "event_line", "files_table", "progress_line", "stream_table",
           "summary_table"]
