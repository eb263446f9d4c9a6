// Small glue for the dashboard; htmx does the rest.
(function () {
  "use strict";
  var LIVE_ROWS_KEPT = 100;

  var resultsRefreshed = false;

  document.addEventListener("htmx:wsAfterMessage", function () {
    // The live table shows the latest results only: keep it bounded.
    var rows = document.getElementById("live-rows");
    while (rows && rows.rows.length > LIVE_ROWS_KEPT) {
      rows.deleteRow(rows.rows.length - 1);
    }
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
