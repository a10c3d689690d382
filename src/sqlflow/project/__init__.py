"""Stage 1, load: the dbt project as plain values (docs/design.md §3).

`load_project` reads `dbt_project.yml`, the models and their yml, the sources (with their
event-time block, `EventTime`), the macros and `profiles/profiles.yml`; nothing here renders
Jinja or parses SQL.
"""

from sqlflow.project.eventtime import EventTime
from sqlflow.project.load import Project, load_project
from sqlflow.project.runmode import AVAILABLE_NOW, STATE_DIR, Mode

__all__ = ["AVAILABLE_NOW", "STATE_DIR", "EventTime", "Mode", "Project", "load_project"]
