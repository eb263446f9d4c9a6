from __future__ import annotations

from ninja import NinjaAPI

api = NinjaAPI(title="evalsite API", version="1")
