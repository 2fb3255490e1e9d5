// cairnq console: live updates over server-sent events, select-all, and
// confirmations. No inline script exists anywhere (the Content-Security-Policy
// forbids it); this file is the whole of the console's JavaScript.
(function () {
  "use strict";
  var body = document.body;
  var base = body.getAttribute("data-base") || "";
  var main = document.getElementById("live");
  var state = document.getElementById("live-state");
  var lost = document.getElementById("live-lost");

  function busy() {
    // Do not replace what the user is working on.
    if (main.querySelector("input[name=id]:checked")) return true;
    var a = document.activeElement;
    if (a && main.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA")) return true;
    return false;
  }

  // The indicator turns on, and the banner saying live updates are lost
  // goes, once the page holds what the stream's first event asked to
  // re-read: from then on it is live.
  var es = null;
  function live() {
    if (es && es.readyState === 1) { state.className = "live-state on"; lost.hidden = true; }
  }
  function offline() { state.className = "live-state"; lost.hidden = false; }

  var pending = false, inflight = false, last = 0;
  function refresh() {
    if (inflight) { pending = true; return; }
    var wait = 1000 - (Date.now() - last);
    if (wait > 0) { if (!pending) { pending = true; setTimeout(function () { pending = false; refresh(); }, wait); } return; }
    if (busy()) { live(); return; }
    inflight = true; last = Date.now();
    fetch(location.href, { headers: { "X-Cairnq-Fragment": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null && !busy()) {
          // Keep folded JSON as the user left it.
          var opened = [];
          main.querySelectorAll("details").forEach(function (d, i) { opened[i] = d.open; });
          main.innerHTML = html;
          main.querySelectorAll("details").forEach(function (d, i) { if (i in opened) d.open = opened[i]; });
          wire(main);
        }
      })
      .catch(function () {})
      .finally(function () { inflight = false; live(); if (pending) { pending = false; refresh(); } });
  }

  function wire(root) {
    root.querySelectorAll("input.select-all").forEach(function (box) {
      box.addEventListener("change", function () {
        main.querySelectorAll("input[name=id]").forEach(function (c) { c.checked = box.checked; });
      });
    });
  }
  wire(document);

  document.addEventListener("submit", function (e) {
    var f = e.target, msg = f.getAttribute("data-confirm");
    if (f.id === "bulk" && !main.querySelector("input[name=id]:checked")) { e.preventDefault(); return; }
    if (msg && !window.confirm(msg)) e.preventDefault();
  });

  // The event stream. The browser reconnects by itself after a dropped
  // connection or a refused one (the server restarting), but gives up on
  // an answer that is not a stream (a proxy's 502, say): then the page
  // opens a new one, waiting longer each time, up to 30s.
  var delay = 1000;
  function connect() {
    // The overview also hears when its background count ends.
    es = new EventSource(base + "/events" + (body.getAttribute("data-page") === "overview" ? "?counts=1" : ""));
    es.addEventListener("open", function () { delay = 1000; });
    es.addEventListener("error", function () {
      offline();
      if (es.readyState === 2) { // closed: the browser will not retry
        setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      }
    });
    es.addEventListener("change", refresh);
  }
  if (window.EventSource && body.getAttribute("data-page") !== "error") connect();
})();
