// hardshift dashboard: live updates by server-sent events, and logs fetched on click. No
// framework. The server renders and escapes every fragment; this only swaps them in.
"use strict";
(function () {
  var live = document.getElementById("live");
  var conn = document.getElementById("conn");
  if (live && live.dataset.live && window.EventSource) {
    var es = new EventSource(live.dataset.live);
    es.onopen = function () { conn.textContent = "live"; };
    es.onerror = function () { conn.textContent = "reconnecting…"; };
    es.onmessage = function (e) {
      live.innerHTML = e.data;
      live.dataset.updated = String(Date.now());
    };
    // Only some rows changed: each replaces the row of the same id.
    es.addEventListener("rows", function (e) {
      var body = document.createElement("tbody");
      body.innerHTML = e.data;
      Array.prototype.slice.call(body.children).forEach(function (tr) {
        var old = document.getElementById(tr.id);
        if (old) old.replaceWith(tr);
      });
      live.dataset.updated = String(Date.now());
    });
  }
  var out = document.getElementById("logs");
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a.fetch");
    if (!a || !out) return;
    ev.preventDefault();
    out.textContent = "asking the node…";
    fetch(a.href, { headers: { Accept: "text/plain" } })
      .then(function (r) { return r.text(); })
      .then(function (t) { out.textContent = t; out.focus(); })
      .catch(function (e) { out.textContent = "failed: " + e; });
  });
})();
