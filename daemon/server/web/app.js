// The status page: what the daemon says now, drawn with textContent only (nothing it shows is read as
// markup), and again each time the server sends a new state.
"use strict";

const $ = (id) => document.getElementById(id);

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}

function fill(id, rows, draw) {
  const body = $(id).tBodies[0];
  body.replaceChildren();
  for (const r of rows) {
    const tr = document.createElement("tr");
    draw(tr, r);
    body.appendChild(tr);
  }
}

function list(id, items, text) {
  const el = $(id);
  el.replaceChildren();
  for (const item of items) {
    const li = document.createElement("li");
    li.textContent = text(item);
    el.appendChild(li);
  }
}

// What each part was last drawn from: a part drawn again only when it changed keeps what a person
// selected in it.
const drawn = new Map();

function changed(part, value) {
  const text = JSON.stringify(value);
  if (drawn.get(part) === text) return false;
  drawn.set(part, text);
  return true;
}

function draw(s) {
  // In UTC, as every other time here; the last change, not a clock: an idle instance sends nothing new.
  $("live").textContent = `live · last change ${new Date().toISOString().slice(11, 19)} UTC`;
  if (changed("where", [s.root, s.generation, s.since])) {
    $("where").textContent = `${s.root} · generation ${s.generation} · up since ${s.since}`;
  }
  if (changed("seats", s.seats)) fill("seats", s.seats, (tr, seat) => {
    cell(tr, seat.name);
    cell(tr, seat.role);
    cell(tr, seat.sessions > 0 ? `yes (${seat.over.join(", ")})` : "no", seat.sessions > 0 ? "good" : "dim");
    cell(tr, String(seat.calls));
    cell(tr, String(seat.refusals), seat.refusals > 0 ? "bad" : "");
  });
  if (changed("tools", s.tools)) fill("tools", s.tools, (tr, tool) => {
    cell(tr, tool.name);
    cell(tr, tool.kind);
    cell(tr, String(tool.bytes));
  });
  if (changed("notServed", s.notServed)) list("not-served", s.notServed, (row) => row);
  if (changed("host", s.host)) drawHost(s.host);
  if (changed("running", [s.running, s.runningTotal])) {
    running = s.running;
    drawRunning();
    const more = s.runningTotal - s.running.length;
    $("running-note").textContent =
      s.runningTotal === 0 ? "No call is running." : more > 0 ? `and ${more} more (waiting for a plugin host, or past those shown)` : "";
  }
  if (changed("calls", s.calls)) fill("calls", s.calls, (tr, c) => {
    cell(tr, c.at);
    cell(tr, c.seat);
    cell(tr, c.tool);
    cell(tr, String(c.ms));
    cell(tr, c.outcome, c.outcome === "text" ? "good" : "bad");
  });
  if (changed("room", s.room)) {
    // Who said it set apart from what was said: a message's own lines cannot pass for another seat's.
    const room = $("room");
    room.replaceChildren();
    for (const m of s.room) {
      const li = document.createElement("li");
      const who = document.createElement("span");
      who.className = "who";
      who.textContent = `${m.at} ${m.seat}:`;
      const said = document.createElement("div");
      said.className = "said";
      said.textContent = m.text;
      li.append(who, said);
      room.appendChild(li);
    }
  }
  if (changed("log", s.log)) {
    // The newest rows are the last: kept in view unless the reader scrolled up to older ones.
    const log = $("log");
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = s.log.join("\n");
    if (atEnd) log.scrollTop = log.scrollHeight;
  }
}

// The calls running now, and for how long: counted here each second, as the server sends a state only
// when it changed.
let running = [];

function drawRunning() {
  fill("running", running, (tr, c) => {
    const seconds = Math.max(0, Math.floor((Date.now() - c.startedMs) / 1000));
    cell(tr, c.seat);
    cell(tr, c.file);
    cell(tr, seconds >= 10 ? `${seconds} s, long` : `${seconds} s`, seconds >= 10 ? "bad" : "");
  });
}

setInterval(() => {
  if (running.length > 0) drawRunning();
}, 1000);

function drawHost(h) {
  const host = $("host");
  host.replaceChildren();
  const pair = (k, v) => {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    host.append(dt, dd);
  };
  pair("pid", h.pid ?? "none running");
  if (h.down) pair("down", h.down);
  pair("box", h.box);
  pair("bounds", h.bounds);
  if (h.memoryBytes != null) pair("memory", `${(h.memoryBytes / 1048576).toFixed(1)} MB`);
  pair("started again", `${h.respawns} times since the server started`);
  pair("ended", h.ends.filter((e) => e.count > 0).map((e) => `${e.cause} ${e.count}`).join(", ") || "never");
}

async function start() {
  try {
    const r = await fetch("api/state", { credentials: "same-origin" });
    if (!r.ok) {
      $("where").textContent = (await r.json()).error ?? `the server answered ${r.status}`;
      return;
    }
    draw(await r.json());
  } catch (e) {
    $("where").textContent = `the server cannot be reached: ${e}`;
    return;
  }
  const events = new EventSource("api/events");
  events.onmessage = (e) => {
    document.body.classList.remove("stale");
    draw(JSON.parse(e.data));
  };
  events.onerror = () => {
    // What is shown is no longer what is: the whole page says so, not only a dim line.
    document.body.classList.add("stale");
    $("live").textContent = "not live: the server went away, or the page's session ended (run ovai web again)";
  };
}

start();
