"""The one module that talks to the channel layer.

Events are hints that something changed; receivers read the truth from the
database. A broken channel layer never stops a run.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

RUN_UPDATE = "run.update"


def run_group(run_id: int) -> str:
    return f"run-{run_id}"


async def publish_run_update(run_id: int, *, final: bool = False) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(
            run_group(run_id), {"type": RUN_UPDATE, "run_id": run_id, "final": final}
        )
    except Exception as exc:  # each channel layer backend raises its own types
        logger.warning(
            "run %s: progress event not sent: %s: %s", run_id, type(exc).__name__, exc
        )


def publish_run_update_sync(run_id: int, *, final: bool = False) -> None:
    async_to_sync(publish_run_update)(run_id, final=final)
