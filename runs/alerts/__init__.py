"""Regression alerts: channels (webhook, Slack, email), findings, deliveries.

- ``findings``: what in a finished run is worth telling (a worse verdict
  against its baseline, a pass rate below its floor, a failed run);
- ``payloads``: the alert as JSON, as Slack's blocks and as an email, and the
  webhook's signature;
- ``delivery``: sending one delivery, attempt after attempt, through the
  network policy; ``dispatch``: off the run's path (a thread of this process,
  or a procrastinate job in the distributed mode);
- ``services`` and ``selectors``: channels, tests and ``announce``.
"""
