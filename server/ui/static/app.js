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
      return { name: f.name.value, cron: f.cron.value, type: f.type.value, input: input };
    }, function () { location.reload(); });
    jsonForm("enqueue", "enqueue-result", "/v1/jobs", function (f, input) { return { type: f.type.value, input: input }; }, function (j, out) {
      show(out, "Enqueued ", link("enqueued-link", "/jobs/", j.id), " (" + j.state + ")");
    });
  }

  function chart() {
    var svg = document.getElementById("chart-throughput");
    if (!svg) return;
    fetch("/v1/stats", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (s) {
      var n = s.seconds, max = 1;
      for (var i = 0; i < n; i++) max = Math.max(max, s.succeeded[i], s.failed[i]);
      function line(arr, cls) {
        var pts = arr.map(function (v, i) { return (i * 600 / (n - 1)).toFixed(1) + "," + (115 - v * 110 / max).toFixed(1); });
        return '<polyline fill="none" stroke-width="2" stroke="' + cls + '" points="' + pts.join(" ") + '"/>';
      }
      svg.innerHTML = line(s.succeeded, "#2b8a3e") + line(s.failed, "#c92a2a");
      var last = s.succeeded[n - 2] || 0;
      document.getElementById("tp-now").textContent = "· now " + last + "/s · peak " + max + "/s";
      var lagSvg = document.getElementById("chart-lag");
      if (lagSvg && s.lag_p99_ms) {
        var lmax = 1;
        for (var j = 0; j < n; j++) lmax = Math.max(lmax, s.lag_p99_ms[j]);
        var lline = function (arr, cls) {
          var pts = arr.map(function (v, i) { return (i * 600 / (n - 1)).toFixed(1) + "," + (115 - v * 110 / lmax).toFixed(1); });
          return '<polyline fill="none" stroke-width="2" stroke="' + cls + '" points="' + pts.join(" ") + '"/>';
        };
        lagSvg.innerHTML = lline(s.lag_p50_ms, "#2b8a3e") + lline(s.lag_p99_ms, "#c92a2a");
        document.getElementById("lag-peak").textContent = "· peak p99 " + lmax.toFixed(1) + " ms";
      }
      var lag = document.getElementById("lag");
      if (lag) lag.textContent = s.pickup_lag_ms.samples ? ("p50 " + s.pickup_lag_ms.p50.toFixed(1) + " ms · p99 " + s.pickup_lag_ms.p99.toFixed(1) + " ms") : "no jobs started in the last minute";
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
