from __future__ import annotations

from django.urls import path
from django.views.generic import RedirectView

app_name = "runs"
urlpatterns = [
    path("", RedirectView.as_view(url="/admin/"), name="run_list"),
]
