"""A plan as JSON: the saved-plan form itself (:mod:`kqplan.planfile.codec`), so the two cannot drift."""

from __future__ import annotations

from kqplan.core.plan import Plan
from kqplan.planfile.codec import dumps_plan


def render_json(plan: Plan) -> str:
    return dumps_plan(plan)
