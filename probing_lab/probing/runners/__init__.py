"""One runner module per task family, registered here: the one list of tasks the lab knows.

Each family's ``run(exp, splits, with_controls, report)`` returns the metrics per layer and the
extras, and calls ``report.layer_done(message)`` after each layer (see ``experiment.RunProgress``)."""

from __future__ import annotations

from . import arc, sentence, span, structural, token, wsd

RUNNERS = {task: family.run for family in (token, sentence, span, arc, structural, wsd) for task in family.TASKS}
TASKS = tuple(RUNNERS)
