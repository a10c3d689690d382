"""Stage 2, render: models through the sandboxed Jinja environment with the dbt subset
analysts use (`ref`, `source`, `config`, `var`, macros), positions mapped back to the model
file (docs/design.md §3).
"""

from sqlflow.rendering.render import RenderedModel, render_project

__all__ = ["RenderedModel", "render_project"]
