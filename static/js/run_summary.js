// Charts of the run summary, drawn with Chart.js from the JSON the page
// carries (json_script). Without JavaScript the charts stay hidden and the
// summary's tables carry the figures.
(function () {
  "use strict";
  var COLORS = {
    bar: "rgba(47, 91, 211, 0.55)",
    interval: "#1f2328",
    ok: "#2da44e",
    retried: "#d4a72c",
    errored: "#d1453b",
  };
  var drawn = [];
  var refreshing = false;

  function percent(value) {
    return value === null ? null : Math.round(value * 1000) / 10;
  }

  function number(value) {
    return Math.abs(value) >= 100 ? value.toFixed(0) : value.toPrecision(3);
  }

  function clock(seconds, width) {
    if (width < 1) {
      return seconds.toFixed(1) + " s";
    }
    var s = Math.round(seconds);
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    var rest = ("0" + (s % 60)).slice(-2);
    return h ? h + ":" + ("0" + m).slice(-2) + ":" + rest : m + ":" + rest;
  }

  function base(extra) {
    var options = {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      plugins: { legend: { display: false } },
    };
    for (var key in extra) {
      options[key] = extra[key];
    }
    return options;
  }

  function passRate(canvas, data) {
    var rows = data.pass_rate.filter(function (row) {
      return row.rate !== null;
    });
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: rows.map(function (row) { return row.scorer; }),
        datasets: [
          {
            label: "95% interval (%)",
            data: rows.map(function (row) { return [percent(row.low), percent(row.high)]; }),
            backgroundColor: COLORS.interval,
            barPercentage: 0.12,
            grouped: false,
            order: 0,
          },
          {
            label: "pass rate (%)",
            data: rows.map(function (row) { return percent(row.rate); }),
            backgroundColor: COLORS.bar,
            grouped: false,
            order: 1,
          },
        ],
      },
      options: base({
        indexAxis: "y",
        scales: { x: { min: 0, max: 100, title: { display: true, text: "% passed" } } },
        plugins: {
          legend: { display: true, position: "bottom" },
          tooltip: {
            callbacks: {
              footer: function (items) {
                var row = rows[items[0].dataIndex];
                return row.passed + " / " + row.results + " passed";
              },
            },
          },
        },
      }),
    });
  }

  function timeline(canvas, data) {
    var t = data.timeline;
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: t.offsets.map(function (offset) { return clock(offset, t.width_seconds); }),
        datasets: [
          { type: "bar", label: "finished", data: t.finished, backgroundColor: COLORS.bar, order: 2 },
          { type: "line", label: "needed retries", data: t.retried, borderColor: COLORS.retried, backgroundColor: COLORS.retried, pointRadius: 0, order: 1 },
          { type: "line", label: "ended in an error", data: t.errored, borderColor: COLORS.errored, backgroundColor: COLORS.errored, pointRadius: 0, order: 0 },
        ],
      },
      options: base({
        scales: {
          x: { title: { display: true, text: "time since start (every " + t.width_seconds + " s)" } },
          y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "results" } },
        },
        plugins: { legend: { display: true, position: "bottom" } },
      }),
    });
  }

  function histogram(canvas, bins, width, counts, unit, label) {
    return new Chart(canvas, {
      type: "bar",
      data: {
        labels: bins.map(function (start) {
          return number(start) + "\u2013" + number(start + width) + unit;
        }),
        datasets: [{ label: label, data: counts, backgroundColor: COLORS.bar, categoryPercentage: 1, barPercentage: 0.95 }],
      },
      options: base({ scales: { y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: label } } } }),
    });
  }

  function latency(canvas, data) {
    var l = data.latency;
    return histogram(canvas, l.bins, l.width, l.counts, " ms", "results");
  }

  function scores(canvas, data) {
    var d = data.scores[Number(canvas.getAttribute("data-index"))];
    if (d.values) {
      return new Chart(canvas, {
        type: "bar",
        data: {
          labels: d.values.map(number),
          datasets: [{ label: "scores", data: d.counts, backgroundColor: COLORS.bar }],
        },
        options: base({ scales: { y: { beginAtZero: true, ticks: { precision: 0 }, title: { display: true, text: "scores" } } } }),
      });
    }
    return histogram(canvas, d.bins, d.width, d.counts, "", "scores");
  }

  var DRAW = { pass_rate: passRate, timeline: timeline, latency: latency, scores: scores };

  function draw() {
    var source = document.getElementById("run-charts-data");
    var box = document.getElementById("run-charts");
    if (!source || !box || typeof Chart === "undefined") {
      return;
    }
    while (drawn.length) {
      drawn.pop().destroy();
    }
    var data = JSON.parse(source.textContent);
    box.hidden = false;
    var canvases = box.querySelectorAll("canvas[data-chart]");
    for (var i = 0; i < canvases.length; i++) {
      var kind = canvases[i].getAttribute("data-chart");
      var figure = canvases[i].closest("figure");
      // The data of each kind of chart is under its name; nothing, no chart.
      if (!data[kind] || (Array.isArray(data[kind]) && !data[kind].length)) {
        figure.hidden = true;
        continue;
      }
      drawn.push(DRAW[kind](canvases[i], data));
    }
  }

  document.addEventListener("DOMContentLoaded", draw);

  // While a run watched live goes, its summary and scoring passes follow it:
  // fetched again at most every REFRESH_MS however fast results arrive, and
  // once more when it has ended. Fetched and swapped here, not by htmx: htmx
  // drops the script elements of what it swaps in, the charts' JSON among them.
  var REFRESH_MS = 3000;
  var ENDED_MS = 500;
  var lastRefresh = 0;
  var timer = null;

  function runEnded() {
    var progress = document.getElementById("run-progress");
    return !!progress && progress.dataset.final === "true";
  }

  function swapIn(fresh, id) {
    var section = fresh.getElementById(id);
    var current = document.getElementById(id);
    if (section && current) {
      current.replaceWith(document.importNode(section, true));
    }
  }

  function refresh() {
    var summary = document.getElementById("run-summary");
    timer = null;
    if (refreshing || !summary || summary.dataset.final === "true") {
      return;
    }
    refreshing = true;
    lastRefresh = Date.now();
    fetch(summary.dataset.refresh, { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.text() : Promise.reject(response.status);
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        swapIn(fresh, "run-summary");
        swapIn(fresh, "scoring-passes");
        if (window.htmx) {
          var passes = document.getElementById("scoring-passes");
          if (passes) {
            htmx.process(passes);
          }
        }
        draw();
      })
      .catch(function () {})
      .finally(function () {
        refreshing = false;
        // The run ended while this fetch was under way: once more, at the end.
        if (runEnded()) {
          schedule();
        }
      });
  }

  function schedule() {
    var summary = document.getElementById("run-summary");
    if (timer !== null || !summary || summary.dataset.final === "true") {
      return;
    }
    // Once it has ended, soon (but never in a tight loop should fetches fail).
    var gap = runEnded() ? ENDED_MS : REFRESH_MS;
    var wait = Math.max(0, lastRefresh + gap - Date.now());
    timer = window.setTimeout(refresh, wait);
  }

  document.addEventListener("evalsite:live", schedule);
})();
