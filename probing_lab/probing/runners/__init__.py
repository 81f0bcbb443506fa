"""One runner module per task family, registered here: the one list of tasks the lab knows."""

from __future__ import annotations

from . import arc, structural, token, wsd

RUNNERS = {task: family.run for family in (token, arc, structural, wsd) for task in family.TASKS}
TASKS = tuple(RUNNERS)
