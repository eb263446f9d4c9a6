"""The endpoint that ranks runs over one dataset."""

from __future__ import annotations

from typing import Annotated

from ninja import Field, Router

from runs.leaderboard.schemas import LeaderboardOut
from runs.leaderboard.selectors import Leaderboard, run_leaderboard
from runs.web.api import READ_ERRORS
from runs.web.requests import ApiRequest
from runs.web.schemas import ErrorOut, QueryText

leaderboard_router = Router(tags=["compare"])


@leaderboard_router.get(
    "", response={200: LeaderboardOut, 400: ErrorOut, **READ_ERRORS}
)
def leaderboard(
    request: ApiRequest,
    runs: str,
    scorer: Annotated[QueryText | None, Field(max_length=100)] = None,
) -> Leaderboard:
    """Runs over one dataset ranked scorer by scorer, over the items they all
    share: each run's pass rate (or mean) and interval, an omnibus test
    (Cochran's Q, or Friedman), Holm-adjusted pairwise tests and shared
    ranks (see ``rank_rule``).

    ``runs`` is a comma-separated list of run ids; ``scorer`` ranks by that
    scorer only.
    """
    return run_leaderboard(user=request.auth, runs=runs, scorer=scorer)
