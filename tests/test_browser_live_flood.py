"""A live run page flooded with updates stays bounded and ends exact.

The page connects to the server and draws its snapshot; then its socket is
closed and handed the messages a server would have sent while a few thousand
items finished: real updates, rendered by the consumer's code from the
server's database after each stored batch, in one burst (as a page that fell
behind receives them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser import USERNAME, manage_shell, signed_in_page

pytestmark = pytest.mark.browser

ITEMS = 3_000
BATCH = 50

RUN = f"""
from runs.datasets.importers import dataset_create_from_items
from runs.models import Project
from runs.results.services import run_create
items = [{{"id": f"f{{i}}", "input": f"{{i}} + 1", "expected": str(i + 1)}}
         for i in range({ITEMS})]
dataset = dataset_create_from_items(project=Project.objects.get(name="Browser"),
    user=None, name="flood", items=items)
run = run_create(user=None, dataset=dataset, target_kind="demo",
    target_config={{"min_latency_ms": 0, "max_latency_ms": 0}},
    scorers=["exact_match"], launch=False, name="flooded")
print(run.pk)
"""

# Store the run's results a batch at a time, and after each batch render the
# update a page would be sent (the progress message, then the rows message);
# the last batch ends the run first.
UPDATES = """
import json
from django.contrib.auth.models import User
from django.utils import timezone
from runs.consumers import live_update
from runs.executor import store
from runs.executor.store import ResultRecord, ScoreRecord
from runs.models import Item, Result, Run
run_id, batch = {run_id}, {batch}
user = User.objects.get(username={user!r})
run = Run.objects.get(pk=run_id)
store.run_claim(run_id, executor_id="flood")
items = list(Item.objects.filter(dataset_id=run.dataset_id).order_by("index"))
messages, after = [], 0
for n in range(0, len(items), batch):
    now = timezone.now()
    store.results_write(run_id, [
        ResultRecord(item_id=item.pk, item_index=item.index, epoch=0,
            status=Result.Status.FAILED if item.index % 7 == 0
            else Result.Status.SUCCEEDED,
            output=str(item.index + 1), attempts=[{{"number": 1}}],
            error_type="" if item.index % 7 else "Boom",
            started_at=now, finished_at=now,
            scores=[ScoreRecord("exact_match", 1.0, True)])
        for item in items[n:n + batch]])
    if n + batch >= len(items):
        store.run_finish(run_id, cancelled=False)
    update = live_update(user, run_id, after_id=after, snapshot=False)
    after = update.last_result_id
    messages.append(update.html)
    if update.rows_html is not None:
        messages.append(update.rows_html)
run.refresh_from_db()
print(json.dumps({{"messages": messages, "newest": after, "figures": [
    run.status, run.succeeded, run.failed, run.timed_out, run.cancelled]}}))
"""

# Keeps the page's websockets, so that the test can hand one its messages.
SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.__received = 0;
  function Kept(url, protocols) {
    const socket = new Native(url, protocols);
    window.__sockets.push(socket);
    socket.addEventListener("message", () => { window.__received += 1; });
    return socket;
  }
  Kept.prototype = Native.prototype;
  for (const key of ["CONNECTING", "OPEN", "CLOSING", "CLOSED"]) {
    Kept[key] = Native[key];
  }
  window.WebSocket = Kept;
})();
"""

# Counts how often the progress block is swapped (each swap replaces it).
WATCH = """() => {
  window.__swaps = 0;
  new MutationObserver((records) => {
    for (const record of records) {
      for (const node of record.removedNodes) {
        if (node.id === "run-progress") window.__swaps += 1;
      }
    }
  }).observe(document.body, { childList: true, subtree: true });
}"""

# Every message in one task, as a burst that arrives between two frames.
FLOOD = """(messages) => {
  const socket = window.__sockets.at(-1);
  for (const data of messages) {
    socket.dispatchEvent(new MessageEvent("message", { data: data }));
  }
}"""

STATE = """() => {
  const progress = document.getElementById("run-progress");
  const counts = [...progress.querySelectorAll("dl.counts dd")].slice(0, 4)
    .map((dd) => Number(dd.textContent.trim()));
  const live = document.getElementById("live");
  const rows = document.getElementById("live-rows").rows;
  return {
    status: progress.dataset.status,
    processed: Number(progress.dataset.processed),
    counts: counts,
    rows: rows.length,
    top: Number(rows[0].dataset.resultId),
    elements: live.getElementsByTagName("*").length,
    swaps: window.__swaps,
  };
}"""


def test_a_flood_of_updates_is_drawn_once_a_frame_and_ends_exact(
    server: str, tmp_path: Path
) -> None:
    run_id = int(manage_shell(tmp_path, RUN).split()[-1])
    with signed_in_page(server) as (page, problems):
        page.add_init_script(SOCKETS)
        page.goto(f"{server}/runs/{run_id}/")
        # The consumer's snapshot, two messages, has been drawn; from now on
        # the messages are the test's.
        page.wait_for_function("() => window.__received >= 2")
        page.evaluate("() => new Promise((done) => requestAnimationFrame(done))")
        page.evaluate("() => window.__sockets.at(-1).close(1000)")
        before = int(page.get_attribute("#live", "data-rendered") or 0)
        page.evaluate(WATCH)
        out = manage_shell(
            tmp_path, UPDATES.format(run_id=run_id, batch=BATCH, user=USERNAME)
        )
        updates = json.loads(out.splitlines()[-1])
        messages = updates["messages"]
        half = len(messages) // 2
        half -= half % 2  # a progress message and its rows stay together
        shown = re.findall(r'data-processed="(\d+)"', messages[half - 2])[-1]

        page.evaluate(FLOOD, messages[:half])
        page.wait_for_function(
            "() => document.getElementById('run-progress').dataset.processed"
            f" === '{shown}'"
        )
        middle = page.evaluate(STATE)
        page.evaluate(FLOOD, messages[half:])
        page.wait_for_function(
            "() => document.getElementById('run-progress').dataset.final === 'true'"
        )
        end = page.evaluate(STATE)
        rendered = page.get_attribute("#live", "data-rendered")
        assert problems == []

    assert len(messages) == 2 * (ITEMS // BATCH)
    # Each burst is drawn in one frame: the stale progress blocks are dropped.
    assert end["swaps"] == 2, end
    assert int(rendered or 0) - before == 2
    # The page does not grow with the items: the live table keeps 100 rows.
    assert middle["rows"] == end["rows"] == 100
    assert end["elements"] <= middle["elements"] + 10, (middle, end)
    # The last update's figures, exact, and the newest result on top.
    status, succeeded, failed, timed_out, cancelled = updates["figures"]
    assert end["status"] == status
    assert end["processed"] == ITEMS == succeeded + failed + timed_out + cancelled
    assert end["counts"] == [succeeded, failed, timed_out, cancelled]
    assert end["top"] == updates["newest"]
    assert re.fullmatch(r"completed(_with_errors)?", status)
