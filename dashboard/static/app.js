// The page's whole logic: one EventSource on /events, one table row per
// metric (sorted by name), a sparkline per hot metric, and the accounting
// lines. Everything it keeps is per metric, so its memory is bounded by the
// key set like its receiver's on the server.
"use strict";

const HOT = 8;          // metrics plotted
const HISTORY = 60;     // points per plot
const params = new URLSearchParams(location.search);
const query = new URLSearchParams();
for (const k of ["pace_ms", "prefix"]) if (params.has(k)) query.set(k, params.get(k));

// Read by the browser test, and handy in the console.
const state = window.keybusDashboard = {
  conn: null, paceMs: null, keys: null,
  batches: 0, firstBatchEvents: null,
  updates: 0, sends: 0, skipped: 0, // this connection's tally: events, the sends they stand for, sends skipped
  rx: null, hub: null, rate: 0, producing: true,
  metrics: new Map(),          // name -> {value, last, updates, sends, history, row}
  error: null,
};

const $ = (id) => document.getElementById(id);
const tbody = document.querySelector("#metrics tbody");
const fmt = (n) => Math.round(n).toLocaleString("en-US");

function row(name) {
  let m = state.metrics.get(name);
  if (m) return m;
  const tr = document.createElement("tr");
  tr.dataset.key = name;
  tr.innerHTML = "<td></td><td class=value></td><td class=last></td><td class=updates></td><td class=sends></td><td class=skipped></td>";
  tr.cells[0].textContent = name;
  m = { value: 0, last: 0, updates: 0, sends: 0, skipped: 0, history: [], row: tr };
  state.metrics.set(name, m);
  // Keep the table sorted by name: insert before the first larger row.
  let before = null;
  for (const other of tbody.rows) if (other.dataset.key > name) { before = other; break; }
  tbody.insertBefore(tr, before);
  return m;
}

function onBatch(msg) {
  state.batches += 1;
  if (state.firstBatchEvents === null) state.firstBatchEvents = msg.events.length;
  for (const [name, value, sends] of msg.events) {
    const m = row(name);
    m.value = value; m.last = sends; m.updates += 1; m.sends += sends;
    m.history.push(value);
    if (m.history.length > HISTORY) m.history.shift();
    const c = m.row.cells;
    c[1].textContent = value.toFixed(2);
    c[2].textContent = fmt(sends);
    c[3].textContent = fmt(m.updates);
    c[4].textContent = fmt(m.sends);
    // Snapshot entries fold no send, so an update stands for max(sends, 1).
    // An update shows one send and skips the rest it folded (a snapshot
    // entry, sends == 0, skips none).
    m.skipped += Math.max(0, sends - 1);
    c[5].textContent = fmt(m.skipped);
    state.updates += 1; state.sends += sends; state.skipped += Math.max(0, sends - 1);
  }
  state.rx = msg.rx; state.hub = msg.hub; state.rate = msg.rate; state.producing = msg.producing;
  renderLines();
  renderPlots();
}

function renderLines() {
  const rx = state.rx, hub = state.hub;
  $("status").textContent =
    `connection #${state.conn} · pace ${state.paceMs} ms · ${state.metrics.size} of ${state.keys} metrics · ` +
    `hub: ${fmt(state.rate)} sends/s, ${fmt(hub.sent)} sent, ${hub.receivers} receivers` +
    (state.producing ? "" : " · workload stopped");
  const skipped = state.skipped;
  const perUpdate = state.updates ? state.sends / state.updates : 0;
  $("summary").textContent =
    `this page got ${fmt(state.updates)} updates in ${fmt(state.batches)} batches standing for ` +
    `${fmt(state.sends)} sends: ${fmt(skipped)} skipped by coalescing (${perUpdate.toFixed(1)} sends per update)`;
  const law = rx.received === rx.folded + rx.annihilated + rx.overflowed + rx.dropped + rx.pending_sends;
  const tally = state.sends === rx.folded;
  $("conservation").innerHTML =
    `conservation (this receiver): received ${fmt(rx.received)} = folded ${fmt(rx.folded)} + dropped ${fmt(rx.dropped)} ` +
    `+ pending ${fmt(rx.pending_sends)} <span class="${law ? "ok" : "bad"}">${law ? "✓" : "✗"}</span>` +
    ` · page tally ${fmt(state.sends)} = folded <span class="${tally ? "ok" : "bad"}">${tally ? "✓" : "✗"}</span>`;
}

function renderPlots() {
  const hot = [...state.metrics.entries()].sort((a, b) => b[1].sends - a[1].sends).slice(0, HOT);
  const box = $("hot");
  const names = hot.map(([n]) => n).join(",");
  if (box.dataset.names !== names) {
    box.dataset.names = names;
    box.innerHTML = "";
    for (const [name] of hot) {
      const div = document.createElement("div");
      div.className = "plot";
      div.dataset.key = name;
      div.innerHTML = `<span class=name></span><span class=now></span><svg viewBox="0 0 ${HISTORY} 48" preserveAspectRatio="none"><polyline/></svg>`;
      div.querySelector(".name").textContent = name;
      box.appendChild(div);
    }
  }
  for (const div of box.children) {
    const m = state.metrics.get(div.dataset.key);
    const h = m.history;
    const lo = Math.min(...h), hi = Math.max(...h), span = hi - lo || 1;
    const pts = h.map((v, i) => `${i + HISTORY - h.length},${(46 - ((v - lo) / span) * 44).toFixed(1)}`).join(" ");
    div.querySelector("polyline").setAttribute("points", pts);
    div.querySelector(".now").textContent = `${m.value.toFixed(2)} · ${fmt(m.last)} sends/update`;
  }
}

async function pollAll() {
  try {
    const s = await (await fetch("/stats")).json();
    const n = s.connections.length;
    const ok = s.conserved === n;
    $("all").innerHTML = `all ${n} connections (/stats): conservation <span class="${ok ? "ok" : "bad"}">${s.conserved}/${n} ✓</span>` +
      (s.rss_bytes ? ` · server memory ${(s.rss_bytes / 1048576).toFixed(1)} MiB` : "");
  } catch (e) { /* the stream's own lines still show */ }
}

const source = new EventSource("/events" + (query.toString() ? "?" + query : ""));
source.addEventListener("hello", (e) => {
  const h = JSON.parse(e.data);
  // A reconnect is a new receiver: its accounting starts from zero.
  state.conn = h.conn; state.paceMs = h.pace_ms; state.keys = h.keys;
  state.updates = 0; state.sends = 0; state.skipped = 0; state.batches = 0;
});
source.addEventListener("batch", (e) => onBatch(JSON.parse(e.data)));
source.addEventListener("error", () => {
  state.error = "stream interrupted";
  $("status").textContent = "stream interrupted; reconnecting…";
});
setInterval(pollAll, 2000);
pollAll();
