"""ASGI entry point: HTTP through Django, websockets through Channels.

Pages and the API go through ``evalsite.handlers``: one thread switch per
request. In the embedded mode the local launcher runs executions on this
server's event loop; it binds to it when the server starts and resumes runs
left running, and the evaluations' schedules tick on it; the alert
deliveries left waiting are sent again.
"""

from __future__ import annotations

import os
import sys

from evalsite.handlers import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
django_asgi_app = get_asgi_application()

# Only now: these import models, which need the app registry that
# get_asgi_application() has just filled.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from evalsite.bodylimit import BodyLimit, install_under_daphne  # noqa: E402
from runs.alerts.dispatch import deliveries_start  # noqa: E402
from runs.evaluations.scheduler import schedules_start  # noqa: E402
from runs.executor.launchers import local_launcher  # noqa: E402
from runs.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            # Consumer routes, typed by Django as view routes (runs/routing.py).
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))  # type: ignore[arg-type]  # see above
        ),
    }
)


def _bind_launcher_when_serving() -> None:
    """Under Daphne, hand the launcher the server's loop once the reactor runs."""
    if "daphne.server" not in sys.modules or settings.EVALSITE_EXECUTOR != "local":
        return
    from daphne.server import twisted_loop
    from twisted.internet import reactor

    reactor.callWhenRunning(
        local_launcher().bind, twisted_loop, resume=settings.EVALSITE_RESUME_ON_START
    )
    if settings.EVALSITE_SCHEDULES:
        reactor.callWhenRunning(schedules_start, twisted_loop)
    # Alert deliveries a stopped server left waiting out a back-off.
    reactor.callWhenRunning(deliveries_start)


_bind_launcher_when_serving()
if "daphne.server" in sys.modules:
    install_under_daphne()
