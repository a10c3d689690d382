"""dbt's `modules` Jinja global for sqlfluff's jinja templater (see .sqlfluff): the macros
use `modules.re` to validate their arguments."""

import datetime  # noqa: F401
import itertools  # noqa: F401
import re  # noqa: F401
