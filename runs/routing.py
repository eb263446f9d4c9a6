from __future__ import annotations

from django.urls import path

from runs import consumers

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", consumers.RunConsumer.as_asgi()),
]
