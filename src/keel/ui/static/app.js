// keel ui: the page. Every value from the journal was written by an agent and is hostile:
// it enters the page as text only (textContent, text nodes, attribute values), never as
// markup. The server's Content-Security-Policy allows no inline script or style either.
"use strict";

const state = { csrf: null, stream: null, route: null, stop: null };
const GROUP_NAMES = {
  call: "tool calls", decision: "decisions", guidance: "guidance", checkpoint: "checkpoints",
  model: "model calls", judgement: "judge", phase: "phases", plan: "plan", probe: "probes",
  stop: "stop/resume", other: "other",
};

// -- building the page, as text only -------------------------------------------------------

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function badge(value, extra) {
  const name = String(value || "").replace(/[^a-z_-]/gi, "-").toLowerCase();
  return el("span", { class: `badge ${name} ${extra || ""}`.trim(), text: value });
}

function route(...parts) {
  return "#/" + parts.map(encodeURIComponent).join("/");
}

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes);
}

function notice(message) {
  const box = document.getElementById("notice");
  box.textContent = message || "";
  box.hidden = !message;
}

// -- formatting ------------------------------------------------------------------------------

function when(ts) {
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19);
}

function clock(ts) {
  return new Date(ts * 1000).toISOString().slice(11, 23);
}

function duration(seconds) {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
}

function cost(row) {
  if (row.cost_usd === null) return "–";
  return `$${row.cost_usd.toFixed(4)}${row.cost_complete ? "" : "+?"}`;
}

// -- talking to the server -----------------------------------------------------------------

class ApiError extends Error {
  constructor(error, status) {
    super((error && error.message) || `HTTP ${status}`);
    this.code = error && error.code;
    this.status = status;
  }
}

async function api(path, params) {
  const url = new URL(path, location.origin);
  for (const [key, value] of Object.entries(params || {})) url.searchParams.set(key, value);
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new ApiError(body.error, response.status);
  return body;
}

async function post(path, data) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Keel-CSRF": state.csrf },
    body: JSON.stringify(data || {}),
  });
  const body = await response.json();
  if (!response.ok) throw new ApiError(body.error, response.status);
  return body;
}

function listen(params, handlers) {
  closeStream();
  const url = new URL("/api/stream", location.origin);
  for (const [key, value] of Object.entries(params || {})) url.searchParams.set(key, value);
  const source = new EventSource(url);
  for (const [name, handler] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handler(JSON.parse(event.data)));
  }
  source.onopen = () => { document.getElementById("live").hidden = false; };
  source.onerror = () => { document.getElementById("live").hidden = true; };
  state.stream = source;
}

function closeStream() {
  if (state.stream) state.stream.close();
  state.stream = null;
  document.getElementById("live").hidden = true;
}

// -- the emergency stop ------------------------------------------------------------------------

function showStop(stop) {
  state.stop = stop;
  const text = document.getElementById("stop-state");
  text.textContent = stop.active ? `STOPPED: ${stop.reason || ""}` : "no emergency stop";
  text.classList.toggle("active", Boolean(stop.active));
  document.getElementById("stop-button").hidden = Boolean(stop.active);
  document.getElementById("stop-reason").hidden = Boolean(stop.active);
  document.getElementById("resume-button").hidden = !stop.active;
}

async function stopWorkspace(event) {
  event.preventDefault();
  const reason = document.getElementById("stop-reason").value.trim();
  try {
    const done = await post("/api/stop", { reason: reason || null });
    showStop(done.stop);
    notice("");
    render();
  } catch (error) {
    notice(`The stop failed: ${error.message}`);
  }
}

async function resumeWorkspace() {
  try {
    await post("/api/resume", {});
    showStop({ active: false });
    notice("");
    render();
  } catch (error) {
    notice(`The resume failed: ${error.message}`);
  }
}

async function resumeSession(sessionId) {
  try {
    await post("/api/resume", { session: sessionId });
    render();
  } catch (error) {
    notice(`The resume failed: ${error.message}`);
  }
}

// -- sessions -------------------------------------------------------------------------------

function sessionRow(row) {
  const link = el("a", { href: route("s", row.session_id), class: "id", text: row.session_id });
  const status = el("td", {}, badge(row.status));
  if (row.detail) status.append(" ", el("span", { class: "muted", text: row.detail }));
  if (row.status === "monitor-stopped" || row.status === "held") {
    status.append(" ", el("button", {
      type: "button", text: "Clear hold", onclick: () => resumeSession(row.session_id),
    }));
  }
  return el("tr", { class: row.own ? "session own" : "session", "data-session": row.session_id },
    el("td", {}, link),
    el("td", { text: row.agent }),
    el("td", { text: when(row.first_ts) }),
    el("td", { class: "num", text: duration(row.duration_s) }),
    el("td", { class: "num calls", text: row.calls }),
    el("td", { class: "num denials", text: row.denials }),
    el("td", { class: "num", text: row.guidance }),
    el("td", { class: "num", text: cost(row) }),
    status,
  );
}

function sessionsTable(rows) {
  const head = ["Session", "Agent", "Start (UTC)", "Duration", "Calls", "Denials", "Guidance",
    "Model cost", "Status"];
  const numeric = new Set(["Duration", "Calls", "Denials", "Guidance", "Model cost"]);
  return el("table", { id: "sessions" },
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {
      class: numeric.has(h) ? "num" : null, text: h,
    })))),
    el("tbody", {}, ...rows.map(sessionRow)),
  );
}

async function sessionsView() {
  const data = await api("/api/sessions");
  showStop(data.stop);
  const agents = data.sessions.filter((s) => !s.own);
  const own = data.sessions.filter((s) => s.own);
  const parts = [el("h1", { text: "Sessions" })];
  if (!data.sessions.length) {
    parts.push(el("p", { class: "muted", text: "Nothing in the journal yet." }));
  } else {
    parts.push(sessionsTable(agents));
    if (own.length) {
      parts.push(el("h2", { text: "keel's own records" }), sessionsTable(own));
    }
  }
  show(...parts);
  let head = data.last_seq;
  listen({}, {
    overview: (overview) => {
      showStop(overview.stop);
      if (overview.last_seq !== head) { head = overview.last_seq; refresh(); }
    },
  });
}

// -- a session's timeline ---------------------------------------------------------------------

function fieldList(fields) {
  if (!fields.length) return null;
  return el("div", { class: "fields" }, ...fields.map(([label, value]) => el("div", {},
    el("span", { class: "label", text: label }), value)));
}

function itemRow(item, sessionId) {
  const what = el("div", { class: "c-what" },
    el("div", { class: "item-text", text: item.text }),
    fieldList(item.fields),
  );
  if (item.checkpoint) {
    what.append(el("a", {
      href: route("s", sessionId, "diff", item.checkpoint), class: "diff-link",
      text: `diff since checkpoint ${item.checkpoint}`,
    }));
  }
  const verdict = item.decision || item.level;
  return el("div", {
    class: `row item ${item.decision || ""}`.trim(), role: "row", "data-id": item.id,
    "data-group": item.group, "data-decision": item.decision || "none",
  },
    el("span", { class: "c-time id", text: clock(item.ts) }),
    el("span", { class: "c-seq num", text: item.id }),
    el("span", { class: "c-kind", text: item.title }),
    el("span", { class: "c-verdict" }, verdict ? badge(verdict) : null),
    what,
  );
}

function filterState() {
  const groups = new Set(
    [...document.querySelectorAll("input[data-filter-group]")]
      .filter((box) => box.checked).map((box) => box.dataset.filterGroup),
  );
  return { decision: document.getElementById("filter-decision").value, groups };
}

function filterRow(row, wanted) {
  const visible = wanted.groups.has(row.dataset.group)
    && (wanted.decision === "all" || row.dataset.decision === wanted.decision);
  row.classList.toggle("hidden", !visible);
  return visible;
}

function applyFilters() {
  const wanted = filterState();
  let shown = 0;
  for (const row of document.querySelectorAll("#timeline .item")) shown += filterRow(row, wanted);
  document.getElementById("shown").textContent = `${shown} shown`;
}

function filters(items) {
  const present = new Set(items.map((i) => i.group));
  const decision = el("select", { id: "filter-decision", onchange: applyFilters },
    ...["all", "allow", "ask", "deny"].map((d) => el("option", { value: d, text: d })));
  const boxes = Object.keys(GROUP_NAMES).filter((g) => present.has(g) || g === "call")
    .map((group) => el("label", {},
      el("input", {
        type: "checkbox", checked: "checked", "data-filter-group": group, onchange: applyFilters,
      }),
      GROUP_NAMES[group]));
  return el("div", { class: "filters" },
    el("label", {}, "decision ", decision), ...boxes, el("span", { id: "shown", class: "muted" }));
}

function upsert(tbody, items, sessionId) {
  for (const item of items) {
    const row = itemRow(item, sessionId);
    const old = tbody.querySelector(`.item[data-id="${Number(item.id)}"]`);
    if (old) old.replaceWith(row);
    else tbody.append(row);
    row.classList.add("fresh");
  }
  applyFilters();
}

const FIRST_ROWS = 200;
const MORE_ROWS = 5000;

function appendRows(tbody, items, sessionId) {
  const wanted = filterState();
  const rows = document.createDocumentFragment();
  for (const item of items) {
    const row = itemRow(item, sessionId);
    filterRow(row, wanted);
    rows.append(row);
  }
  tbody.append(rows);
}

// The first rows go in at once, the rest in slices between frames: a long session is on
// screen as soon as its data is, and the live stream starts once every row is in.
function renderRows(tbody, items, sessionId, done) {
  appendRows(tbody, items.slice(0, FIRST_ROWS), sessionId);
  requestAnimationFrame(() => setTimeout(() => performance.mark("keel:painted")));
  let next = FIRST_ROWS;
  const more = () => {
    if (!tbody.isConnected) return;
    if (next >= items.length) { applyFilters(); done(); return; }
    appendRows(tbody, items.slice(next, next + MORE_ROWS), sessionId);
    next += MORE_ROWS;
    setTimeout(more, 0);
  };
  if (items.length <= FIRST_ROWS) more();
  else requestAnimationFrame(() => setTimeout(more, 0));  // paint the first rows first
}

async function timelineView(sessionId) {
  // Marks for bench/bench_ui.py: the view opened, its data arrived, rows painted, all in.
  performance.clearMarks();
  performance.mark("keel:open");
  const data = await api("/api/timeline", { session: sessionId });
  performance.mark("keel:data");
  const session = data.session;
  showStop(data.stop);
  const tbody = el("div", { class: "rows", role: "rowgroup" });
  const links = [el("a", { href: route(), text: "← sessions" })];
  if (data.plans) {
    links.push(el("a", { href: route("s", session.session_id, "evidence"),
      text: `evidence (${data.plans} plan run${data.plans > 1 ? "s" : ""})` }));
  }
  show(
    el("div", { class: "summary" }, ...links),
    el("h1", {}, "Session ", el("span", { class: "id", text: session.session_id })),
    el("div", { class: "summary muted" },
      el("span", { text: `agent ${session.agent}` }),
      el("span", { id: "event-count", text: `${session.events} events` }),
      el("span", { text: `${when(session.first_ts)} – ${when(session.last_ts)} UTC` })),
    filters(data.items),
    el("div", { id: "timeline", class: "timeline", role: "table" },
      el("div", { class: "row head", role: "row" },
        ...["time", "seq", "kind", "verdict", "what"].map((c, i) => el("span", {
          class: `c-${c}`, role: "columnheader",
          text: ["Time (UTC)", "#", "Kind", "Decision", "What"][i],
        }))),
      tbody),
  );
  renderRows(tbody, data.items, session.session_id, () => {
    performance.mark("keel:complete");
    listen({ session: session.session_id, after: data.last_seq }, {
      items: (items) => upsert(tbody, items, session.session_id),
      overview: (overview) => showStop(overview.stop),
    });
  });
}

// -- a checkpoint's diff ------------------------------------------------------------------------

function diffLine(line) {
  let kind = "";
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) kind = "meta";
  else if (line.startsWith("+")) kind = "add";
  else if (line.startsWith("-")) kind = "del";
  else if (line.startsWith("@@")) kind = "hunk";
  return el("span", { class: kind || null, text: line });
}

async function diffView(sessionId, checkpoint) {
  const data = await api("/api/diff", { checkpoint });
  const cp = data.checkpoint;
  const parts = [
    el("div", { class: "summary" }, el("a", { href: route("s", sessionId), text: "← timeline" })),
    el("h1", {}, "Changes since checkpoint ", el("span", { class: "id", text: cp.short || cp.id })),
    el("p", { class: "muted", text: `${cp.kind} checkpoint, ${when(cp.ts)} UTC (as keel diff ${cp.short || cp.id})` }),
  ];
  if (data.prompt_files.length) {
    parts.push(el("p", { class: "notice", text:
      `Review first: prompt files the next agent session reads: ${data.prompt_files.join(", ")}` }));
  }
  if (data.outside_scope.length) {
    parts.push(el("p", { class: "notice", text: `Outside [scope]: ${data.outside_scope.join(", ")}` }));
  }
  parts.push(el("ul", { id: "changes" }, ...data.changes.map((c) => el("li", {},
    badge(c.status), " ", el("span", { class: "id", text: c.path }),
    c.old_path ? el("span", { class: "muted", text: ` (from ${c.old_path})` }) : null))));
  if (!data.changes.length) parts.push(el("p", { class: "muted", text: "No changes." }));
  if (data.patch) {
    const pre = el("pre", { class: "diff", id: "patch" });
    const lines = data.patch.replace(/\n$/, "").split("\n");
    pre.append(...lines.map(diffLine));
    parts.push(pre);
  }
  show(...parts);
}

// -- a plan's evidence tree -------------------------------------------------------------------

function stepNode(step) {
  const head = el("div", {},
    badge(step.status), " ",
    el("span", { class: "id", text: `[${step.step_id}]` }), " ",
    el("span", { class: "muted", text: step.type }), " ",
    el("span", { class: "item-text", text: step.summary }));
  const node = el("li", { class: "step", "data-step": step.step_id }, head);
  if (step.description) node.append(el("div", { class: "muted", text: step.description }));
  if (step.fact) node.append(el("div", { class: "fact", text: step.fact }));
  if (step.detail) node.append(el("div", { class: "item-text", text: step.detail }));
  for (const branch of step.branches) {
    node.append(el("div", { class: `branch ${branch.taken ? "taken" : "not-taken"}` },
      el("span", { class: "branch-label",
        text: `${branch.label}${branch.taken ? " (taken)" : ""}` }),
      el("ul", {}, ...branch.steps.map(stepNode))));
  }
  return node;
}

async function evidenceView(sessionId) {
  const data = await api("/api/evidence", { session: sessionId });
  const parts = [
    el("div", { class: "summary" }, el("a", { href: route("s", sessionId), text: "← timeline" })),
    el("h1", {}, "Evidence of ", el("span", { class: "id", text: data.session.session_id })),
  ];
  if (!data.plans.length) parts.push(el("p", { class: "muted", text: "No plan ran in this session." }));
  for (const plan of data.plans) {
    const box = el("section", { class: "plan" },
      el("h2", {}, plan.goal, " ", badge(plan.state || "running")));
    if (plan.issues.length) box.append(el("ul", {}, ...plan.issues.map((i) => el("li", { text: i }))));
    box.append(el("ul", { class: "tree" }, ...plan.steps.map(stepNode)));
    if (plan.facts.length) {
      box.append(el("h2", { text: "Verified facts" }),
        el("ul", { class: "facts" }, ...plan.facts.map((f) => el("li", { text: f }))));
    }
    parts.push(box);
  }
  show(...parts);
}

// -- the journal's integrity --------------------------------------------------------------------

async function verifyView() {
  const data = await api("/api/verify");
  const parts = [el("h1", { text: "Journal integrity" }),
    el("p", {}, badge(data.ok ? "intact" : "broken"), " ",
      el("span", { text: `${data.events} events` }))];
  const text = data.text.replace(/\n$/, "").split("\n");
  parts.push(el("pre", { class: "diff", id: "verify-text" }, ...text.map((t) => el("span", { text: t }))));
  if (data.problems.length) {
    parts.push(el("table", { id: "problems" },
      el("thead", {}, el("tr", {}, ...["Seq", "Code", "Problem"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...data.problems.map((p) => el("tr", {},
        el("td", { class: "num", text: p.seq }), el("td", { text: p.code }),
        el("td", { text: p.message }))))));
  }
  parts.push(el("p", { class: "muted",
    text: "The same check as keel verify: the keyed chain, the head recorded outside the workspace, SQLite's integrity check." }));
  show(...parts);
}

// -- routing ----------------------------------------------------------------------------------

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean)
    .map(decodeURIComponent);
  return parts;
}

async function render() {
  const parts = parseRoute();
  closeStream();
  try {
    if (parts[0] === "s" && parts[1] && parts[2] === "diff" && parts[3]) {
      await diffView(parts[1], parts[3]);
    } else if (parts[0] === "s" && parts[1] && parts[2] === "evidence") {
      await evidenceView(parts[1]);
    } else if (parts[0] === "s" && parts[1]) {
      await timelineView(parts[1]);
    } else if (parts[0] === "verify") {
      await verifyView();
    } else {
      await sessionsView();
    }
  } catch (error) {
    show(el("p", { class: "notice", text: `${error.message}${error.code ? ` [${error.code}]` : ""}` }),
      el("a", { href: route(), text: "← sessions" }));
  }
}

let pending = null;
function refresh() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; render(); }, 200);
}

async function start() {
  // The token came in the URL; the server set a cookie: keep it out of the address bar.
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  document.getElementById("stop-form").addEventListener("submit", stopWorkspace);
  document.getElementById("resume-button").addEventListener("click", resumeWorkspace);
  window.addEventListener("hashchange", render);
  try {
    const meta = await api("/api/meta");
    state.csrf = meta.csrf;
    document.getElementById("workspace").textContent = meta.root;
    showStop(meta.stop);
  } catch (error) {
    notice(`keel ui cannot reach its server: ${error.message}`);
    return;
  }
  await render();
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", start);
