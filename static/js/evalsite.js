// Small glue for the dashboard; htmx does the rest.
(function () {
  "use strict";
  var LIVE_ROWS_KEPT = 100;

  // The live view of a running run. Its websocket messages are not swapped
  // as they arrive but once per animation frame: of the progress blocks that
  // arrived meanwhile only the latest is shown (each is a whole snapshot),
  // and their result rows are merged, the newest LIVE_ROWS_KEPT kept. However
  // fast messages come, the page does one update's work per frame at most.
  // Each rendered frame fires "evalsite:live" on the live element; its
  // data-received and data-rendered count messages and rendered frames.
  var live = { received: 0, rendered: 0, progress: null, rows: [], frame: null };
  var resultsRefreshed = false;

  function rowsOf(message) {
    return message.slice(message.indexOf(">") + 1, message.lastIndexOf("</tbody>"));
  }

  // One message for the rows of every message since the last frame: the
  // newest first, from the last full list (a snapshot) if one came.
  function mergedRows(messages) {
    var parts = [];
    var count = 0;
    var base = null;
    for (var i = messages.length - 1; i >= 0 && count < LIVE_ROWS_KEPT; i--) {
      var rows = rowsOf(messages[i]);
      if (messages[i].indexOf('id="live-rows"') >= 0) {
        base = rows;
        break;
      }
      parts.push(rows);
      count += rows.split("<tr").length - 1;
    }
    if (base !== null) {
      parts.push(base);
      return '<tbody id="live-rows" hx-swap-oob="true">' + parts.join("") + "</tbody>";
    }
    return parts.length
      ? '<tbody hx-swap-oob="afterbegin:#live-rows">' + parts.join("") + "</tbody>"
      : null;
  }

  function render() {
    live.frame = null;
    var element = document.getElementById("live");
    var progress = live.progress;
    var rows = live.rows.length ? mergedRows(live.rows) : null;
    live.progress = null;
    live.rows = [];
    if (!element) {
      return;
    }
    var spec = { swapStyle: "none", settleDelay: 0 };
    if (progress !== null) {
      htmx.swap(element, progress, spec);
    }
    if (rows !== null) {
      htmx.swap(element, rows, spec);
    }
    // The live table shows the latest results only: keep it bounded.
    var table = document.getElementById("live-rows");
    while (table && table.rows.length > LIVE_ROWS_KEPT) {
      table.deleteRow(table.rows.length - 1);
    }
    live.rendered += 1;
    element.dataset.received = live.received;
    element.dataset.rendered = live.rendered;
    htmx.trigger(element, "evalsite:live");
  }

  document.addEventListener("htmx:wsBeforeMessage", function (event) {
    var message = event.detail.message;
    event.preventDefault(); // swapped at the next frame, with the others
    live.received += 1;
    if (/^\s*<tbody/.test(message)) {
      // Frames wait while the tab is hidden: keep what the next one needs.
      // A full list replaces all before it; each message has a row at least.
      if (message.indexOf('id="live-rows"') >= 0) {
        live.rows = [];
      }
      live.rows.push(message);
      if (live.rows.length > LIVE_ROWS_KEPT) {
        live.rows.shift();
      }
    } else {
      live.progress = message; // a newer snapshot: the older one is stale
    }
    if (live.frame === null) {
      live.frame = window.requestAnimationFrame(render);
    }
  });

  document.addEventListener("evalsite:live", function () {
    // Once the run has ended, bring the results table (dataset order) up to
    // date in place, with the page's own filters.
    var progress = document.getElementById("run-progress");
    var results = document.getElementById("results");
    if (!resultsRefreshed && results && progress && progress.dataset.final === "true") {
      resultsRefreshed = true;
      htmx.ajax("GET", window.location.href, {
        target: "#results",
        select: "#results",
        swap: "outerHTML",
      });
    }
  });

  // The Content-Security-Policy forbids inline handlers and style attributes:
  // behaviour and sizes come from data- attributes, applied here.
  document.addEventListener("change", function (event) {
    var field = event.target.closest("[data-submit-on-change]");
    if (field && field.form) {
      field.form.requestSubmit();
    }
  });

  function applyWidths(root) {
    var elements = root.querySelectorAll ? root.querySelectorAll("[data-width]") : [];
    for (var i = 0; i < elements.length; i++) {
      elements[i].style.width = elements[i].getAttribute("data-width") + "%";
    }
  }
  // A field that only some choices of a select need shows for those alone:
  // data-shown-for="<select id>:<value> <value>".
  function applyShownFor(root) {
    var fields = root.querySelectorAll ? root.querySelectorAll("[data-shown-for]") : [];
    for (var i = 0; i < fields.length; i++) {
      var rule = fields[i].getAttribute("data-shown-for").split(":");
      var select = document.getElementById(rule[0]);
      if (select) {
        fields[i].hidden = rule[1].split(" ").indexOf(select.value) < 0;
      }
    }
  }
  document.addEventListener("change", function (event) {
    if (event.target.tagName === "SELECT") {
      applyShownFor(document);
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    applyWidths(document);
    applyShownFor(document);
  });
  // Every element htmx adds (a swap, a websocket update) passes through here.
  document.addEventListener("htmx:load", function (event) {
    applyWidths(event.detail.elt.parentNode || event.detail.elt);
  });

})();
