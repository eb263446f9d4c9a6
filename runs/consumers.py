from __future__ import annotations

from channels.generic.websocket import AsyncWebsocketConsumer


class RunConsumer(AsyncWebsocketConsumer):
    pass
