// The review page, keyboard first: one key per label or score, saved as you go.
(function () {
  "use strict";
  var COLLAPSED_CHARS = 1200;

  var root = document.getElementById("review");
  if (!root) {
    return;
  }
  var multiple = root.getAttribute("data-multiple") === "true";
  var fields = Array.prototype.slice.call(root.querySelectorAll(".review-field"));
  var note = document.getElementById("review-note");
  var status = document.getElementById("review-status");
  var current = 0;
  var saving = Promise.resolve();

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"];
    } catch (error) {
      return "";
    }
  }

  function valueOf(field) {
    var raw = field.getAttribute("data-value");
    if (!raw) {
      return null;
    }
    try {
      return JSON.parse(raw);
    } catch (error) {
      return null;
    }
  }

  function show() {
    fields.forEach(function (field, index) {
      var value = valueOf(field);
      field.classList.toggle("current", index === current);
      field.querySelectorAll(".review-key").forEach(function (button) {
        var mine = JSON.parse(button.getAttribute("data-value"));
        var chosen = Array.isArray(value) ? value.indexOf(mine) >= 0 : value === mine;
        button.classList.toggle("chosen", chosen);
        button.setAttribute("aria-pressed", chosen ? "true" : "false");
      });
    });
  }

  function complete() {
    return fields.every(function (field) {
      var value = valueOf(field);
      return value !== null && !(Array.isArray(value) && value.length === 0);
    });
  }

  function body() {
    var payload = { criteria: {} };
    fields.forEach(function (field) {
      var name = field.getAttribute("data-field");
      var value = valueOf(field);
      if (name === "") {
        payload.value = value;
      } else if (value !== null) {
        payload.criteria[name] = value;
      }
    });
    if (note) {
      payload.note = note.value;
    }
    return payload;
  }

  function save() {
    var payload = body();
    status.textContent = "Saving…";
    saving = saving.then(function () {
      return fetch(root.getAttribute("data-save-url"), {
        method: "PUT",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(payload),
      }).then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) {
            throw new Error(answer.detail || response.statusText);
          }
          status.textContent = answer.submitted ? "Saved." : "Saved (not complete yet).";
          return answer;
        });
      }).catch(function (error) {
        status.textContent = "Not saved: " + error.message;
        throw error;
      });
    });
    return saving;
  }

  function go(url) {
    saving.then(function () {
      if (url) {
        window.location.assign(url);
      }
    }, function () {});
  }

  function choose(key) {
    var field = fields[current];
    var button = field && field.querySelector('.review-key[data-key="' + key + '"]');
    if (!button) {
      return false;
    }
    var value = JSON.parse(button.getAttribute("data-value"));
    if (multiple) {
      var chosen = valueOf(field) || [];
      var at = chosen.indexOf(value);
      if (at >= 0) {
        chosen.splice(at, 1);
      } else {
        chosen.push(value);
      }
      field.setAttribute("data-value", JSON.stringify(chosen));
      show();
      return true;
    }
    field.setAttribute("data-value", JSON.stringify(value));
    if (current < fields.length - 1) {
      current += 1;
      show();
      save();
      return true;
    }
    show();
    advance();
    return true;
  }

  function advance() {
    if (!complete()) {
      save();
      return;
    }
    save().then(function () {
      go(root.getAttribute("data-next-url"));
    }, function () {});
  }

  function collapse() {
    root.querySelectorAll("[data-collapsible]").forEach(function (box) {
      if (box.textContent.length > COLLAPSED_CHARS) {
        box.classList.add("collapsed");
      }
    });
  }

  function expandAll() {
    root.querySelectorAll("[data-collapsible].collapsed").forEach(function (box) {
      box.classList.remove("collapsed");
    });
  }

  root.addEventListener("click", function (event) {
    var button = event.target.closest(".review-key");
    if (!button) {
      return;
    }
    current = fields.indexOf(button.closest(".review-field"));
    choose(button.getAttribute("data-key"));
  });

  if (note) {
    note.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        note.blur();
      } else if (event.key === "Escape") {
        note.blur();
      }
    });
    note.addEventListener("change", function () {
      save();
    });
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey) {
      return;
    }
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT")) {
      return;
    }
    var key = event.key;
    var handled = true;
    if (key === "ArrowRight" || key === "j") {
      go(root.getAttribute("data-next-url"));
    } else if (key === "ArrowLeft" || key === "k") {
      go(root.getAttribute("data-previous-url"));
    } else if (key === "n" && note) {
      note.focus();
    } else if (key === "e") {
      expandAll();
    } else if (key === "Enter") {
      advance();
    } else if (key === "ArrowDown" || key === "Tab") {
      current = Math.min(current + 1, fields.length - 1);
      show();
    } else if (key === "ArrowUp") {
      current = Math.max(current - 1, 0);
      show();
    } else {
      handled = choose(key.toLowerCase());
    }
    if (handled) {
      event.preventDefault();
    }
  });

  fields.forEach(function (field, index) {
    if (valueOf(field) !== null && index === current && index < fields.length - 1) {
      current = index + 1;
    }
  });
  collapse();
  show();
})();
