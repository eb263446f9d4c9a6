from __future__ import annotations

from django.urls import path

from runs import consumers

# Django types path() for views; channels routes ASGI consumers with it.
websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", consumers.RunConsumer.as_asgi()),  # type: ignore[arg-type]  # see above
]
