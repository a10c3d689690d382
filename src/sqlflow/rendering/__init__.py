"""Stage 2, render: models through the sandboxed Jinja environment with the dbt subset
analysts use (`ref`, `source`, `config`, `var`, macros), positions mapped back to the model
file (docs/design.md §3). `render.render_project` is the entry point; `name_check` and
`ownership_check` refuse configs that name what a model may not write. (No re-exports here:
the planner imports `sourcemap`, so importing this package must not pull in the renderer.)
"""
