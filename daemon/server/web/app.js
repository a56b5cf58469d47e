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

function draw(s) {
  $("where").textContent = `${s.root} · generation ${s.generation} · up since ${s.since}`;
  $("live").textContent = `updated ${new Date().toLocaleTimeString()}`;
  fill("seats", s.seats, (tr, seat) => {
    cell(tr, seat.name);
    cell(tr, seat.role);
    cell(tr, seat.sessions > 0 ? `yes (${seat.over.join(", ")})` : "no", seat.sessions > 0 ? "good" : "dim");
    cell(tr, String(seat.calls));
    cell(tr, String(seat.refusals), seat.refusals > 0 ? "bad" : "");
  });
  fill("tools", s.tools, (tr, tool) => {
    cell(tr, tool.name);
    cell(tr, tool.kind);
    cell(tr, String(tool.bytes));
  });
  list("not-served", s.notServed, (row) => row);
  const host = $("host");
  host.replaceChildren();
  const pair = (k, v) => {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    host.append(dt, dd);
  };
  pair("pid", s.host.pid ?? "none running");
  if (s.host.down) pair("down", s.host.down);
  pair("box", s.host.box);
  pair("bounds", s.host.bounds);
  if (s.host.memoryBytes != null) pair("memory", `${(s.host.memoryBytes / 1048576).toFixed(1)} MB`);
  pair("restarted", String(s.host.respawns));
  pair("ended", s.host.ends.filter((e) => e.count > 0).map((e) => `${e.cause} ${e.count}`).join(", ") || "never");
  fill("calls", s.calls, (tr, c) => {
    cell(tr, c.at);
    cell(tr, c.seat);
    cell(tr, c.tool);
    cell(tr, String(c.ms));
    cell(tr, c.outcome, c.outcome === "text" ? "good" : "bad");
  });
  list("room", s.room, (m) => `${m.at} ${m.seat}: ${m.text}`);
  $("log").textContent = s.log.join("\n");
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
  events.onmessage = (e) => draw(JSON.parse(e.data));
  events.onerror = () => {
    $("live").textContent = "not live: the server went away, or the page's session ended (run ovai web again)";
  };
}

start();
