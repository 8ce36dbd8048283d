// hopper dashboard: live refresh over Server-Sent Events, actions through the JSON API.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");

  // Reload the page's main section in place (debounced) when events arrive.
  var pending = null;
  function refresh() {
    if (pending) return;
    pending = setTimeout(function () {
      pending = null;
      fetch(location.href, { credentials: "same-origin" }).then(function (r) { return r.text(); }).then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        if (!fresh) return;
        var keep = document.activeElement && main.contains(document.activeElement) && document.activeElement.tagName !== "BUTTON";
        if (keep) return; // do not disturb someone typing
        if (bulkHeld()) return; // nor someone selecting rows
        main.innerHTML = fresh.innerHTML;
        wire();
        chart();
      }).catch(function () {});
    }, 400);
  }

  // The change feed: every process's transitions, not only this server's.
  if (window.EventSource) {
    var es = new EventSource("/v1/changes/stream?after=end");
    es.onopen = function () { live.classList.add("on"); };
    es.onerror = function () { live.classList.remove("on"); };
    es.addEventListener("change", refresh);
  }

  function post(url, body) {
    return fetch(url, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: body || "" })
      .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || r.statusText); return j; }); });
  }

  // link is an anchor to base + id, the id escaped as one path segment and
  // shown as text (never parsed as HTML).
  function link(id, base, target) {
    var a = document.createElement("a");
    a.id = id;
    a.className = "mono";
    a.href = base + encodeURIComponent(target);
    a.textContent = target;
    return a;
  }
  function show(out, before, node, after) {
    out.textContent = "";
    out.append(before, node, after);
    out.className = "note";
  }

  function wire() {
    document.querySelectorAll("button[data-post]").forEach(function (b) {
      b.onclick = function () {
        b.disabled = true;
        post(b.getAttribute("data-post"), b.getAttribute("data-body")).then(function () { location.reload(); })
          .catch(function (e) { b.disabled = false; alert(e.message); });
      };
    });
    document.querySelectorAll("button[data-prompt]").forEach(function (b) {
      b.onclick = function () {
        var body = prompt(b.getAttribute("data-prompt"), "{}");
        if (body === null) return;
        post(b.getAttribute("data-post"), body).then(function () { location.reload(); }).catch(function (e) { alert(e.message); });
      };
    });
    // The forms that post a JSON body with an "input" field: body builds it
    // from the form and the parsed input, done shows the answer.
    function jsonForm(id, resultId, url, body, done) {
      var f = document.getElementById(id);
      if (!f) return;
      f.onsubmit = function (ev) {
        ev.preventDefault();
        var out = document.getElementById(resultId);
        var fail = function (msg) { out.textContent = msg; out.className = "note error"; };
        var input;
        try { input = JSON.parse(f.input.value || "null"); } catch (e) { fail("input is not JSON: " + e.message); return; }
        post(url, JSON.stringify(body(f, input))).then(function (j) { done(j, out); }).catch(function (e) { fail(e.message); });
      };
    }
    jsonForm("start-run", "start-result", "/v1/runs", function (f, input) { return { workflow: f.workflow.value, input: input }; }, function (j, out) {
      show(out, "Started ", link("started-link", "/runs/", j.run_id), "");
    });
    jsonForm("define-schedule", "define-result", "/v1/schedules", function (f, input) {
      // The target is "type:NAME" or "workflow:NAME".
      var t = f.target.value, i = t.indexOf(":"), body = { name: f.name.value, cron: f.cron.value, input: input };
      body[t.slice(0, i) === "workflow" ? "workflow" : "type"] = t.slice(i + 1);
      return body;
    }, function () { location.reload(); });
    jsonForm("enqueue", "enqueue-result", "/v1/jobs", function (f, input) { return { type: f.type.value, input: input }; }, function (j, out) {
      show(out, "Enqueued ", link("enqueued-link", "/jobs/", j.id), " (" + j.state + ")");
    });
    wireBulk();
  }

  // Charts: the fleet's figures over a window, with axes; the window,
  // queue and type are in the URL, so a view can be shared.
  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function fmtNum(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + "k";
    if (v === 0) return "0";
    if (v < 1) return String(+v.toPrecision(2));
    return v >= 10 ? v.toFixed(0) : v.toFixed(1);
  }
  // fmtTime labels the time axis in UTC, the zone every table and page
  // of the dashboard uses; the last label names it.
  function fmtTime(d, step) {
    var h = String(d.getUTCHours()).padStart(2, "0"), m = String(d.getUTCMinutes()).padStart(2, "0");
    return step < 60 ? h + ":" + m + ":" + String(d.getUTCSeconds()).padStart(2, "0") : h + ":" + m;
  }
  // draw renders lines (each {v: [...], c: color}) of n points spread from
  // t0 to t1 (ms) into svg, with a y axis from 0 to a rounded maximum and
  // five time labels; it returns the maximum.
  function draw(svg, lines, t0, t1, step, unit) {
    var L = 44, R = 594, T = 8, B = 118, max = 0;
    lines.forEach(function (l) { l.v.forEach(function (y) { max = Math.max(max, y); }); });
    var top = niceMax(max), out = "";
    for (var g = 0; g <= 2; g++) {
      var gy = B - g * (B - T) / 2;
      out += '<line class="grid" x1="' + L + '" x2="' + R + '" y1="' + gy + '" y2="' + gy + '"/>';
      out += '<text x="' + (L - 4) + '" y="' + (gy + 3) + '" text-anchor="end">' + fmtNum(top * g / 2) + (g === 2 ? " " + unit : "") + "</text>";
    }
    for (var k = 0; k <= 4; k++) {
      var tx = L + k * (R - L) / 4;
      out += '<text x="' + tx.toFixed(1) + '" y="134" text-anchor="' + (k === 0 ? "start" : k === 4 ? "end" : "middle") + '">' + fmtTime(new Date(t0 + k * (t1 - t0) / 4), step) + (k === 4 ? " UTC" : "") + "</text>";
    }
    lines.forEach(function (l) {
      var n = l.v.length;
      if (!n) return;
      var pts = l.v.map(function (y, i) {
        var x = l.t ? L + (l.t[i] - t0) * (R - L) / Math.max(t1 - t0, 1) : L + i * (R - L) / Math.max(n - 1, 1);
        return x.toFixed(1) + "," + (B - y * (B - T) / top).toFixed(1);
      });
      out += '<polyline fill="none" stroke-width="1.5" stroke="' + l.c + '" points="' + pts.join(" ") + '"/>';
    });
    svg.innerHTML = out;
    return max;
  }
  function chartQuery() {
    var q = new URLSearchParams(location.search), out = new URLSearchParams();
    ["window", "queue", "type"].forEach(function (k) { if (q.get(k)) out.set(k, q.get(k)); });
    if (!out.get("window")) out.set("window", "5m");
    return out;
  }
  function fillSelect(sel, names, value) {
    if (!sel) return;
    var have = Array.prototype.map.call(sel.options, function (o) { return o.value; });
    names.forEach(function (n) {
      if (have.indexOf(n) < 0) { var o = document.createElement("option"); o.value = n; o.textContent = n; sel.append(o); }
    });
    sel.value = value || "";
  }

  // ---- Bulk actions: the Jobs, Dead letters and Runs tables ----------------
  // Rows are picked with their checkboxes, or every row matching the page's
  // filter; an action asks first, saying how many (a dry run counts the
  // filter's matches, and the action is confirmed for at most that many),
  // then says what it did. One JSON request per action: the server pages.

  var bulkNote = ""; // the last result, kept across live refreshes

  // bulkHeld reports whether rows are picked or an action is being asked or
  // sent: the live refresh waits, so a selection is not lost.
  function bulkHeld() {
    var bar = document.getElementById("bulkbar");
    return !!bar && (bar.getAttribute("data-busy") === "1" || bar.getAttribute("data-mode") === "filter" ||
      document.querySelectorAll("input.sel:checked").length > 0);
  }

  // bulkFilter turns a page's query string into a bulk action's filter.
  function bulkFilter(kind, qs) {
    var lists = kind === "runs" ? ["status"] : ["state", "type", "queue"];
    var paging = ["cursor", "limit", "order", "offset"];
    var f = {};
    new URLSearchParams(qs).forEach(function (v, k) {
      if (v === "" || paging.indexOf(k) >= 0) return;
      if (lists.indexOf(k) >= 0) {
        f[k] = (f[k] || []).concat(v.split(",").map(function (s) { return s.trim(); }).filter(Boolean));
      } else if (k === "meta") {
        var i = v.indexOf("=");
        if (i > 0) { f.meta = f.meta || {}; f.meta[v.slice(0, i)] = v.slice(i + 1); }
      } else {
        f[k] = v;
      }
    });
    return f;
  }

  var bulkPast = { cancel: "cancelled", retry: "retried", redrive: "redriven", delete: "deleted" };

  function wireBulk() {
    var bar = document.getElementById("bulkbar");
    if (!bar) return;
    var $ = function (id) { return document.getElementById(id); };
    var boxes = [].slice.call(document.querySelectorAll("input.sel"));
    var page = $("sel-page"), all = $("bulk-all"), count = $("bulk-count"), result = $("bulk-result");
    var confirmBox = $("bulk-confirm"), question = $("bulk-question"), yes = $("bulk-yes"), no = $("bulk-no");
    var noun = bar.getAttribute("data-noun"), acts = [].slice.call(bar.querySelectorAll(".bulk-act"));
    var pending = null;
    var plural = function (n) { return n.toLocaleString() + " " + noun + (n === 1 ? "" : "s"); };
    var picked = function () { return boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; }); };
    var byFilter = function () { return bar.getAttribute("data-mode") === "filter"; };
    var setBusy = function (on) { bar.setAttribute("data-busy", on ? "1" : ""); };
    result.textContent = bulkNote;

    function update() {
      var n = picked().length;
      count.textContent = byFilter() ? "All " + noun + "s matching this filter" : n ? plural(n) + " selected" : "Select " + noun + "s to act on them";
      all.hidden = byFilter() || !(page && page.checked && boxes.length > 0);
      acts.forEach(function (b) { b.disabled = !(n || byFilter()) || !confirmBox.hidden; });
    }
    function reset() {
      boxes.forEach(function (b) { b.checked = false; });
      if (page) page.checked = false;
      bar.setAttribute("data-mode", "ids");
      pending = null;
      confirmBox.hidden = true;
      setBusy(false);
      update();
    }
    function fail(e) {
      setBusy(false);
      confirmBox.hidden = true;
      bulkNote = "";
      result.textContent = e.message;
      result.className = "note error";
      update();
    }
    function ask(text, body) {
      pending = body;
      question.textContent = text;
      confirmBox.hidden = false;
      setBusy(true);
      update();
      yes.disabled = false;
      yes.focus();
    }
    boxes.forEach(function (b) {
      b.onchange = function () {
        if (!b.checked) { bar.setAttribute("data-mode", "ids"); if (page) page.checked = false; }
        update();
      };
    });
    if (page) page.onchange = function () {
      boxes.forEach(function (b) { b.checked = page.checked; });
      if (!page.checked) bar.setAttribute("data-mode", "ids");
      update();
    };
    all.onclick = function () { bar.setAttribute("data-mode", "filter"); update(); };
    acts.forEach(function (btn) {
      btn.onclick = function () {
        var action = btn.getAttribute("data-action"), label = btn.textContent;
        opener = btn;
        bulkNote = "";
        result.textContent = "";
        result.className = "note";
        if (!byFilter()) {
          var ids = picked();
          ask(label + " " + plural(ids.length) + "?", { action: action, ids: ids });
          return;
        }
        var filter = bulkFilter(bar.getAttribute("data-kind"), bar.getAttribute("data-query"));
        setBusy(true);
        post(bar.getAttribute("data-endpoint"), JSON.stringify({ action: action, filter: filter, dry_run: true })).then(function (r) {
          if (!r.matched) {
            setBusy(false);
            result.textContent = "No " + noun + " matching this filter can be " + bulkPast[action] + ".";
            return;
          }
          ask(label + " all " + plural(r.matched) + " matching this filter?", { action: action, filter: filter, max: r.matched });
        }).catch(fail);
      };
    });
    var opener = null; // the action button that asked, which gets the focus back
    no.onclick = function () {
      pending = null;
      confirmBox.hidden = true;
      setBusy(false);
      update();
      if (opener) opener.focus();
    };
    // Escape answers no, as a dialog's Escape does.
    document.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape" && !confirmBox.hidden && !yes.disabled) { ev.preventDefault(); no.onclick(); }
    });
    yes.onclick = function () {
      var body = pending;
      if (!body) return;
      yes.disabled = true;
      post(bar.getAttribute("data-endpoint"), JSON.stringify(body)).then(function (r) {
        var past = bulkPast[r.action] || r.action;
        bulkNote = past.charAt(0).toUpperCase() + past.slice(1) + " " + r.changed.toLocaleString() + " of " + plural(r.matched) +
          (r.skipped ? " (" + r.skipped.toLocaleString() + " skipped: changed meanwhile, or their unique key is taken)" : "") +
          (r.more ? "; more matched than were confirmed and were left as they are" : "") + ".";
        result.textContent = bulkNote;
        result.className = "note";
        reset();
        refresh();
      }).catch(fail);
    };
    update();
  }
  // ---- end of bulk actions --------------------------------------------------

  function chart() {
    var svg = document.getElementById("chart-throughput");
    if (!svg) return;
    var q = chartQuery(), form = document.getElementById("chart-controls");
    if (form && !form.wired) {
      form.wired = true;
      form.onchange = function () {
        var next = new URLSearchParams(location.search);
        ["window", "queue", "type"].forEach(function (k) { if (form[k].value) next.set(k, form[k].value); else next.delete(k); });
        history.replaceState(null, "", location.pathname + "?" + next.toString());
        chart();
      };
    }
    fetch("/v1/stats?" + q.toString(), { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (s) {
      if (form) {
        form.window.value = s.window;
        fillSelect(form.queue, s.queues, q.get("queue"));
        fillSelect(form.type, s.types, q.get("type"));
      }
      var hist = document.getElementById("chart-history"), h = s.history;
      if (hist && h) {
        var from = new Date(h.from).toLocaleString();
        hist.textContent = !h.done ? "· reading the store's history: charts from " + from + " so far" :
          h.capped ? "· history capped at " + fmtNum(h.changes) + " changes: charts from " + from : "";
      }
      var step = s.step_seconds, t1 = new Date(s.until).getTime(), t0 = t1 - (s.buckets - 1) * step * 1000;
      var perS = function (a) { return a.map(function (v) { return v / step; }); };
      var unit = step === 1 ? "/s" : "/s (per-minute mean)";
      document.getElementById("tp-unit").textContent = "jobs" + unit;
      var max = draw(svg, [{ v: perS(s.succeeded), c: "#2b8a3e" }, { v: perS(s.failed), c: "#c92a2a" }], t0, t1, step, "/s");
      document.getElementById("tp-now").textContent = "· peak " + fmtNum(max) + "/s";
      var lagSvg = document.getElementById("chart-lag");
      if (lagSvg) {
        var lmax = draw(lagSvg, [{ v: s.lag_p50_ms, c: "#2b8a3e" }, { v: s.lag_p99_ms, c: "#c92a2a" }], t0, t1, step, "ms");
        document.getElementById("lag-peak").textContent = "· peak p99 " + fmtNum(lmax) + " ms";
      }
      var lag = document.getElementById("lag");
      if (lag) lag.textContent = s.pickup_lag_ms.samples ? ("last minute: p50 " + s.pickup_lag_ms.p50.toFixed(1) + " ms · p99 " + s.pickup_lag_ms.p99.toFixed(1) + " ms") : "no jobs started in the last minute";
      var dSvg = document.getElementById("chart-depth");
      if (dSvg) {
        // Samples per queue at the same instant sum to the fleet's depth.
        var at = [], due = {}, age = {};
        s.depths.forEach(function (d) {
          var t = new Date(d.at).getTime();
          if (!(t in due)) { at.push(t); due[t] = 0; age[t] = 0; }
          due[t] += d.due;
          age[t] = Math.max(age[t], d.oldest_due_age_seconds);
        });
        draw(dSvg, [{ v: at.map(function (t) { return due[t]; }), t: at, c: "#2b8a3e" },
          { v: at.map(function (t) { return age[t]; }), t: at, c: "#c92a2a" }], t0, t1, step, "");
        var last = at[at.length - 1];
        document.getElementById("depth-now").textContent = last === undefined ? "· no sample yet" : "· now " + fmtNum(due[last]) + " due, oldest " + fmtNum(age[last]) + " s";
      }
      var rSvg = document.getElementById("chart-runs");
      if (rSvg) {
        document.getElementById("runs-unit").textContent = "runs" + unit;
        draw(rSvg, [{ v: perS(s.runs_completed), c: "#2b8a3e" }, { v: perS(s.runs_failed), c: "#c92a2a" }, { v: perS(s.runs_compensated), c: "#e67700" }], t0, t1, step, "/s");
      }
    }).catch(function () {});
  }

  // A run's page refreshes while the run is live (its stream and history
  // are rendered by the server).
  if (document.body.getAttribute("data-page") === "run") {
    setInterval(function () {
      var st = document.querySelector("#run-status .state");
      if (st && ["completed", "failed", "compensated", "cancelled", "quarantined"].indexOf(st.textContent) < 0) refresh();
    }, 1000);
  }

  wire();
  chart();
  setInterval(chart, 5000);
})();
