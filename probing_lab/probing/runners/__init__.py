"""One runner module per task family, registered here: the one list of tasks the lab knows.

Each family's ``run(exp, splits, with_controls, report)`` gives the metrics per layer and the extras:
returned, with ``report.layer_done(message)`` called after each layer (see ``experiment.RunProgress``),
or, for the families that probe layer entries side by side, as a generator that yields its
``layer_pool.LayerJobs`` once, is sent back the entries, and returns (``layer_pool.run_runners``: a
model's and its random-init baseline's entries share one pool)."""

from __future__ import annotations

from . import arc, sentence, span, structural, token, wsd

RUNNERS = {task: family.run for family in (token, sentence, span, arc, structural, wsd) for task in family.TASKS}
TASKS = tuple(RUNNERS)
