"""The pages' URLs: each capability's, composed."""

from __future__ import annotations

from runs.alerts import urls as alerts
from runs.catalogue import urls as catalogue
from runs.clusters import urls as clusters
from runs.compare import urls as compare
from runs.datasets import urls as datasets
from runs.demo import urls as demo
from runs.estimates import urls as estimates
from runs.evaluations import urls as evaluations
from runs.judges import urls as judges
from runs.leaderboard import urls as leaderboard
from runs.projects import urls as projects
from runs.rescore import urls as rescore
from runs.results import urls as results
from runs.retry import urls as retry
from runs.review import urls as review
from runs.targets import urls as targets
from runs.trajectories import urls as trajectories

app_name = "runs"
urlpatterns = [
    *results.urlpatterns,
    *demo.urlpatterns,
    *datasets.urlpatterns,
    *targets.urlpatterns,
    *projects.urlpatterns,
    *catalogue.urlpatterns,
    *compare.urlpatterns,
    *leaderboard.urlpatterns,
    *clusters.urlpatterns,
    *retry.urlpatterns,
    *rescore.urlpatterns,
    *alerts.urlpatterns,
    *estimates.urlpatterns,
    *evaluations.urlpatterns,
    *review.urlpatterns,
    *trajectories.urlpatterns,
    *judges.urlpatterns,
]
