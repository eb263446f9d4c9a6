"""The leaderboard page: ticked runs ranked, scorer by scorer."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from runs.compare.selectors import run_ids_parse
from runs.errors import InvalidInput
from runs.leaderboard.ranking import ALPHA, NORMAL_EFFECTIVE_ITEMS, RANK_RULE
from runs.leaderboard.selectors import Leaderboard, run_leaderboard
from runs.review.calibration import uncalibrated_judges
from runs.web.requests import AuthedRequest

TEMPLATE = "runs/leaderboard/leaderboard.html"


def leaderboard_url(runs: list[int]) -> str:
    query = urlencode({"runs": ",".join(map(str, runs))})
    return f"{reverse('runs:leaderboard')}?{query}"


@require_GET
def leaderboard(request: AuthedRequest) -> HttpResponse:
    try:
        if "run" in request.GET:  # ticked in the runs list
            ticked = run_ids_parse(",".join(request.GET.getlist("run")), field="run")
            return redirect(leaderboard_url(list(dict.fromkeys(ticked))))
        board = run_leaderboard(
            user=request.user,
            runs=request.GET.get("runs"),
            scorer=request.GET.get("scorer") or None,
        )
    except InvalidInput as exc:
        return render(request, TEMPLATE, {"error": exc}, status=400)
    return render(request, TEMPLATE, _context(board))


def _context(board: Leaderboard) -> dict[str, Any]:
    runs = {run.pk: run for run in board.runs}
    return {
        "board": board,
        "scorers": [
            (scorer, [(standing, runs[standing.run]) for standing in scorer.standings])
            for scorer in board.scorers
        ],
        "alpha": ALPHA,
        "normal_effective_items": NORMAL_EFFECTIVE_ITEMS,
        "rank_rule": RANK_RULE,
        "judge_notes": uncalibrated_judges(
            board.runs, [scorer.scorer for scorer in board.scorers]
        ),
    }
