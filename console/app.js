// app.js is the console's one script. Every byte serve, a tool or a model
// produced is put in the page as text (textContent), never as markup; the
// characters a terminal or the page's layout could act on are shown as
// escapes. The host token lives in sessionStorage and travels only in the
// Authorization header: never in a URL, a cookie or the page's markup.
"use strict";

const TOKEN_KEY = "acpguard.console.token";
const CLIENT_KEY = "acpguard.console.client";
const POLL_MS = 2000;
const DECISIONS_MS = 5000;
const $ = (id) => document.getElementById(id);

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let clientId = sessionStorage.getItem(CLIENT_KEY);
if (!clientId) {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  clientId = "console_" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  sessionStorage.setItem(CLIENT_KEY, clientId);
}

// A #token= fragment (serve --open) is taken and removed from the address
// bar at once; a browser never sends a fragment to the server. One that
// does not decode signs out: the sign-in asks for the token.
let badLink = false;
if (location.hash) {
  if (location.hash.startsWith("#token=")) {
    try {
      token = decodeURIComponent(location.hash.slice("#token=".length));
      sessionStorage.setItem(TOKEN_KEY, token);
    } catch {
      badLink = true;
    }
  }
  history.replaceState(null, "", location.pathname + location.search);
}

let caps = null;
let timers = [];
let selected = null; // the session shown
let stream = null; // {sid, ctrl, last}
let conv = null; // what the conversation shows of the selected session
let decisionsByCall = new Map();

// Characters shown as escapes: C0 and C1 controls but newline and tab,
// and the invisible formatting characters (bidi overrides among them).
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ufff9-\ufffb]/g;

function escapeOf(c) {
  const n = c.charCodeAt(0);
  if (c === "\r") return "\\r";
  return n < 0x100 ? "\\x" + n.toString(16).padStart(2, "0") : "\\u" + n.toString(16).padStart(4, "0");
}

// MAX_TEXT bounds the UTF-8 bytes of one text block shown (an answer, a
// tool's output, a diff): a hostile output of any size cannot freeze the
// tab; what is cut is counted in a marker.
const MAX_TEXT = 64 << 10;
const utf8 = new TextEncoder();

// capText cuts s to at most max UTF-8 bytes, at a character's start, and
// says how many bytes it cut.
function capText(s, max) {
  if (s.length * 3 <= max) return { shown: s, more: 0 };
  const b = utf8.encode(s);
  if (b.length <= max) return { shown: s, more: 0 };
  let cut = max;
  while (cut > 0 && (b[cut] & 0xc0) === 0x80) cut--;
  return { shown: new TextDecoder().decode(b.subarray(0, cut)), more: b.length - cut };
}

// appendMore adds the marker of n bytes not shown.
function appendMore(parent, n) {
  const e = document.createElement("span");
  e.className = "more";
  e.textContent = "\u2026 " + n + " bytes more not shown";
  parent.append(e);
}

// appendText adds s to parent as text, at most MAX_TEXT bytes of it and a
// marker of the rest (more bytes already cut are counted too), each hidden
// character as an escape in a span of its own, so that it is told from the
// same text typed.
function appendText(parent, s, more) {
  const c = capText(String(s), MAX_TEXT);
  s = c.shown;
  more = (more || 0) + c.more;
  let at = 0;
  for (const m of s.matchAll(HIDDEN)) {
    if (m.index > at) parent.append(document.createTextNode(s.slice(at, m.index)));
    const e = document.createElement("span");
    e.className = "esc";
    e.textContent = escapeOf(m[0]);
    parent.append(e);
    at = m.index + m[0].length;
  }
  if (at < s.length) parent.append(document.createTextNode(s.slice(at)));
  if (more > 0) appendMore(parent, more);
}

function setText(node, s, more) {
  node.textContent = "";
  appendText(node, s, more);
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) appendText(e, text);
  return e;
}

function notice(msg) {
  const n = $("notice");
  n.hidden = !msg;
  setText(n, msg || "");
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function headers() {
  const h = { "X-Qwen-Client-Id": clientId };
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

class APIError extends Error {
  constructor(status, msg) {
    super(msg);
    this.status = status;
  }
}

async function api(method, path, body) {
  const h = headers();
  if (body !== undefined) h["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method,
    headers: h,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  if (r.status === 401) {
    signedOut(token ? "serve refused the token: sign in again" : "");
    throw new APIError(401, "unauthorized");
  }
  const t = await r.text();
  let data = null;
  try {
    data = t ? JSON.parse(t) : null;
  } catch {
    data = null;
  }
  if (!r.ok) throw new APIError(r.status, (data && data.error) || "HTTP " + r.status);
  return data;
}

function stopAll() {
  timers.forEach(clearInterval);
  timers = [];
  if (stream) stream.ctrl.abort();
  stream = null;
}

function signedOut(msg) {
  stopAll();
  token = "";
  sessionStorage.removeItem(TOKEN_KEY);
  selected = null;
  $("app").hidden = true;
  $("signout").hidden = true;
  $("signin").hidden = false;
  setText($("health"), "signed out");
  notice(msg);
  $("token").focus();
}

async function start() {
  try {
    caps = await api("GET", "/capabilities");
  } catch (e) {
    if (e.status !== 401) notice("serve did not answer: " + e.message);
    return;
  }
  notice("");
  $("signin").hidden = true;
  $("app").hidden = false;
  $("signout").hidden = !token;
  const ws = $("ws");
  ws.textContent = "";
  for (const w of caps.workspaces || []) {
    const o = el("option", "", w.cwd);
    o.value = w.cwd;
    ws.append(o);
  }
  refresh();
  refreshDecisions();
  timers.push(setInterval(refresh, POLL_MS), setInterval(refreshDecisions, DECISIONS_MS));
}

async function refresh() {
  try {
    const [h, s] = await Promise.all([api("GET", "/console/api/health"), api("GET", "/console/api/sessions")]);
    setText($("health"), `guard ${h.guard} (${h.provider}) · calls allowed ${h.calls.allowed}, denied ${h.calls.denied}, failed ${h.calls.failed} · ` +
      `${h.permissionsWaiting} permission requests waiting · ${h.sessions} sessions`);
    renderSessions(s.sessions);
  } catch (e) {
    if (e.status !== 401) notice("refresh: " + e.message);
  }
}

const STATE_TEXT = {
  idle: "idle",
  running: "running a prompt",
  waiting_for_decision: "waiting for your decision",
  died: "ended: its ACP child died",
};

function renderSessions(list) {
  const ul = $("sessions");
  // A keyboard user's place in the list survives the refresh.
  const focused = ul.contains(document.activeElement) ? document.activeElement.dataset.sid : null;
  ul.textContent = "";
  let found = false;
  for (const s of list) {
    const li = el("li");
    const b = el("button", "", s.sessionId.slice(0, 8) + "… " + s.workspace);
    b.type = "button";
    b.title = s.sessionId;
    b.dataset.sid = s.sessionId;
    let state = STATE_TEXT[s.state] || s.state;
    if (s.queuedPrompts) state += `, ${s.queuedPrompts} queued`;
    b.append(el("span", "state " + (s.state === "waiting_for_decision" ? "waiting" : ""), state + " · sandbox " + s.sandbox));
    b.setAttribute("aria-current", String(s.sessionId === selected));
    b.addEventListener("click", () => select(s.sessionId));
    li.append(b);
    ul.append(li);
    if (s.sessionId === focused) b.focus();
    if (s.sessionId === selected) {
      found = true;
      setText($("session-meta"), `${s.workspace} · ${state} · sandbox ${s.sandbox}` + (s.activePromptId ? ` · prompt ${s.activePromptId}` : ""));
      for (const p of s.pendingPermissions) showRequest(p.requestId, p.toolCall, p.options);
    }
  }
  if (selected && !found) setText($("session-meta"), "this session has ended");
  if (!list.length) ul.append(el("li", "hint", "No session yet: create one."));
}

function select(sid) {
  if (stream) stream.ctrl.abort();
  selected = sid;
  conv = { lastKind: null, lastEl: null, lastText: "", tools: new Map(), requests: new Map(), callOfRequest: new Map() };
  decisionsByCall = new Map();
  $("conversation").textContent = "";
  $("pending").textContent = "";
  setText($("session-title"), "Session " + sid);
  setText($("session-meta"), "");
  $("session-actions").hidden = false;
  $("prompt-form").hidden = false;
  openStream(sid);
  refresh();
  $("prompt").focus();
}

// openStream reads the session's events with fetch and a stream reader,
// so that the token travels in a header, and resumes with Last-Event-ID
// after a drop.
async function openStream(sid) {
  const s = { sid, ctrl: new AbortController(), last: null };
  stream = s;
  while (!s.ctrl.signal.aborted) {
    let retry = 3000;
    let ended = false;
    const h = headers();
    if (s.last !== null) h["Last-Event-ID"] = String(s.last);
    try {
      const r = await fetch("/session/" + encodeURIComponent(sid) + "/events", { headers: h, signal: s.ctrl.signal, cache: "no-store", credentials: "omit" });
      if (r.status === 401) {
        signedOut("serve refused the token: sign in again");
        return;
      }
      if (!r.ok) {
        const d = await r.json().catch(() => ({}));
        addNote("event stream: " + (d.error || "HTTP " + r.status), "failed");
        if (r.status === 404 || r.status === 410) return;
      } else {
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const frame = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const ev = parseFrame(frame);
            if (ev.retry) retry = ev.retry;
            if (ev.id !== null) s.last = ev.id;
            if (ev.data !== null && stream === s && handleEvent(ev.type, ev.data)) ended = true;
          }
        }
      }
    } catch (e) {
      if (s.ctrl.signal.aborted) return;
    }
    if (ended) return;
    await sleep(retry);
  }
}

function parseFrame(frame) {
  const ev = { id: null, type: "message", data: null, retry: 0 };
  for (const line of frame.split("\n")) {
    if (line.startsWith(":")) continue;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let v = i < 0 ? "" : line.slice(i + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    if (field === "id") ev.id = v;
    else if (field === "event") ev.type = v;
    else if (field === "data") ev.data = ev.data === null ? v : ev.data + "\n" + v;
    else if (field === "retry") ev.retry = parseInt(v, 10) || 0;
  }
  return ev;
}

function addItem(cls, who) {
  const li = el("li", cls);
  if (who) li.append(el("span", "who", who));
  $("conversation").append(li);
  conv.lastKind = null;
  li.scrollIntoView({ block: "nearest" });
  return li;
}

function addNote(text, cls) {
  return addItem("note " + (cls || ""), "").appendChild(el("div", "text", text));
}

function appendChunk(kind, text) {
  if (conv.lastKind !== kind) {
    const li = addItem(kind, { user: "you", assistant: "assistant", thought: "assistant, thinking" }[kind]);
    conv.lastEl = li.appendChild(el("div", "text"));
    conv.lastKind = kind;
    conv.lastText = "";
    conv.lastMore = 0;
  }
  // Past MAX_TEXT a chunk is only counted: the text kept stays bounded.
  if (conv.lastMore > 0) {
    conv.lastMore += utf8.encode(text).length;
  } else {
    const c = capText(conv.lastText + text, MAX_TEXT);
    conv.lastText = c.shown;
    conv.lastMore = c.more;
  }
  setText(conv.lastEl, conv.lastText, conv.lastMore);
}

// handleEvent shows one event; it returns true when the stream ends for good.
function handleEvent(type, raw) {
  let env;
  try {
    env = JSON.parse(raw);
  } catch {
    return false;
  }
  const d = env.data || {};
  switch (type) {
    case "session_update":
      showUpdate(d.update || {});
      break;
    case "permission_request":
      showRequest(d.requestId, d.toolCall, d.options);
      break;
    case "permission_resolved":
      resolved(d);
      break;
    case "permission_already_resolved":
      addNote("a vote came after the request was answered");
      break;
    case "prompt_cancelled":
      addNote("turn cancelled" + (d.reason ? ": " + d.reason : ""));
      break;
    case "turn_complete":
      addNote("turn ended: " + (d.stopReason === "end_turn" ? "done" : d.stopReason));
      loadCallDecisions();
      refresh();
      refreshDecisions();
      break;
    case "turn_error":
      addNote("turn failed: " + d.message, "failed");
      break;
    case "session_closed":
      addNote("session closed" + (d.message ? ": " + d.message : ""));
      $("pending").textContent = "";
      return true;
    case "session_died":
      addNote("session ended: its ACP child died", "failed");
      $("pending").textContent = "";
      return true;
    case "stream_dropped":
      addNote("the event stream was dropped; resuming");
      break;
  }
  return false;
}

function showUpdate(u) {
  const c = u.content || {};
  switch (u.sessionUpdate) {
    case "user_message_chunk":
      appendChunk("user", c.type === "text" ? c.text : "[" + c.type + "]");
      break;
    case "agent_message_chunk":
      if (c.type === "text" && c.text) appendChunk("assistant", c.text);
      break;
    case "agent_thought_chunk":
      if (c.type === "text" && c.text) appendChunk("thought", c.text);
      break;
    case "tool_call":
    case "tool_call_update":
      toolUpdate(u);
      break;
    case "plan":
      addNote("plan:\n" + (u.entries || []).map((e) => "[" + e.status + "] " + e.content).join("\n"));
      break;
  }
}

function toolUpdate(u) {
  let t = conv.tools.get(u.toolCallId);
  if (!t) {
    const li = addItem("tool");
    t = { head: el("span", "who"), title: el("div", "text"), status: el("div", "status"), input: el("pre"), diff: el("pre"), out: el("pre"), state: "pending", text: "", answer: "" };
    t.status.setAttribute("data-call", u.toolCallId);
    t.waiting = [...conv.requests.values()].some((r) => r.call === u.toolCallId && !r.done);
    li.append(t.head, t.title, t.status, t.input, t.diff, t.out);
    conv.tools.set(u.toolCallId, t);
  }
  const name = (u._meta && u._meta.toolName) || t.name || u.kind || "tool";
  t.name = name;
  setText(t.head, "tool call: " + name);
  if (u.title) setText(t.title, u.title);
  if (u.rawInput && Object.keys(u.rawInput).length) setText(t.input, "arguments: " + JSON.stringify(u.rawInput, null, 2));
  if (u.status) t.state = u.status;
  if (Array.isArray(u.content) && u.content.length) {
    const texts = [];
    t.diff.textContent = "";
    for (const item of u.content) {
      if (item.type === "diff") showDiff(t.diff, item);
      else if (item.type === "content" && item.content && item.content.type === "text") texts.push(item.content.text);
    }
    t.text = texts.join("\n");
    setText(t.out, t.text);
  }
  toolStatus(t, u.toolCallId);
  if (t.state === "completed" || t.state === "failed") loadCallDecisions();
}

// showDiff writes an edit's diff: the lines both texts share at the start
// and end as they are, the rest removed (-) and added (+), MAX_TEXT bytes
// of it in all and a marker of the rest.
function showDiff(pre, item) {
  const a = item.oldText == null ? [] : String(item.oldText).split("\n");
  const b = String(item.newText == null ? "" : item.newText).split("\n");
  let s = 0;
  while (s < a.length && s < b.length && a[s] === b[s]) s++;
  let e = 0;
  while (e < a.length - s && e < b.length - s && a[a.length - 1 - e] === b[b.length - 1 - e]) e++;
  pre.append(el("span", "who", (item.oldText == null ? "new file " : "edit of ") + item.path + "\n"));
  let budget = MAX_TEXT;
  let more = 0;
  const line = (cls, prefix, text) => {
    const c = capText(prefix + text + "\n", Math.max(budget, 0));
    budget -= utf8.encode(c.shown).length;
    more += c.more;
    if (c.shown) pre.append(el("span", cls, c.shown));
  };
  a.slice(0, s).forEach((x) => line("", "  ", x));
  a.slice(s, a.length - e).forEach((x) => line("del", "- ", x));
  b.slice(s, b.length - e).forEach((x) => line("add", "+ ", x));
  a.slice(a.length - e).forEach((x) => line("", "  ", x));
  if (more > 0) appendMore(pre, more);
}

// toolStatus says what the call's state means, with the guard's decision
// and its shown reason where serve's decision log has it.
function toolStatus(t, callId) {
  const d = decisionsByCall.get(callId);
  let text;
  let cls = t.state;
  switch (t.state) {
    case "pending":
      text = t.waiting ? "waiting for your decision" : "waiting to run";
      cls = t.waiting ? "waiting" : "";
      break;
    case "in_progress":
      text = "running";
      break;
    case "completed":
      text = "completed";
      break;
    case "failed":
      if (d && d.outcome === "denied") {
        text = "denied by policy: " + (d.reason || t.text);
        cls = "denied";
      } else if (d && d.outcome !== "allowed") {
        text = "not run: the guard failed closed (" + d.outcome + ")";
      } else if (t.answer === "rejected") {
        text = "rejected: " + t.text;
        cls = "rejected";
      } else text = "failed: " + t.text;
      break;
    default:
      text = t.state;
  }
  if (d && d.outcome === "allowed" && t.state !== "failed") text += " · allowed by the guard";
  t.status.className = "status " + cls;
  setText(t.status, text);
}

let decisionsPending = null;
function loadCallDecisions() {
  if (decisionsPending || !selected) return;
  const sid = selected;
  decisionsPending = setTimeout(async () => {
    decisionsPending = null;
    try {
      const r = await api("GET", "/console/api/decisions?limit=1000&session=" + encodeURIComponent(sid));
      if (sid !== selected) return;
      for (const d of r.decisions.slice().reverse()) decisionsByCall.set(d.toolCallId, d);
      for (const [id, t] of conv.tools) toolStatus(t, id);
    } catch (e) {
      /* shown by the next refresh */
    }
  }, 200);
}

function showRequest(rid, call, options) {
  if (!conv || conv.requests.has(rid)) return;
  call = call || {};
  const box = el("div", "request");
  box.append(el("h3", "waiting", "waiting for your decision"));
  box.append(el("div", "text", (call.title || "a tool call") + ((call._meta && call._meta.toolName) ? " (" + call._meta.toolName + ")" : "")));
  if (call.rawInput && Object.keys(call.rawInput).length) box.append(el("pre", "", JSON.stringify(call.rawInput, null, 2)));
  const buttons = el("div");
  for (const o of options || []) {
    const b = el("button", "", o.name || o.optionId);
    b.type = "button";
    b.dataset.kind = o.kind;
    b.addEventListener("click", () => vote(rid, o.optionId, box));
    buttons.append(b);
  }
  box.append(buttons);
  $("pending").append(box);
  conv.requests.set(rid, { box, options: options || [], call: call.toolCallId });
  const t = conv.tools.get(call.toolCallId);
  if (t) {
    t.waiting = true;
    toolStatus(t, call.toolCallId);
  }
}

async function vote(rid, optionId, box) {
  box.querySelectorAll("button").forEach((b) => (b.disabled = true));
  try {
    await api("POST", "/session/" + encodeURIComponent(selected) + "/permission/" + encodeURIComponent(rid), { outcome: { outcome: "selected", optionId } });
  } catch (e) {
    if (e.status === 404) dropRequest(rid);
    else box.querySelectorAll("button").forEach((b) => (b.disabled = false));
    notice("vote: " + e.message);
  }
}

function dropRequest(rid) {
  const r = conv.requests.get(rid);
  if (r) r.box.remove();
  return r;
}

function resolved(d) {
  const r = dropRequest(d.requestId);
  const out = d.outcome || {};
  let what = "the request was cancelled";
  let kind = "reject_once";
  if (out.outcome === "selected") {
    const o = ((r && r.options) || []).find((x) => x.optionId === out.optionId);
    kind = o ? o.kind : "";
    what = (d.voterClientId === clientId ? "you chose " : d.voterClientId ? "another host chose " : "answered: ") + "“" + (o ? o.name : out.optionId) + "”";
  }
  addNote(what);
  const t = r && conv.tools.get(r.call);
  if (t) {
    t.waiting = false;
    t.answer = kind.startsWith("reject") ? "rejected" : "allowed";
    toolStatus(t, r.call);
  }
  if (r) conv.requests.set(d.requestId, { box: r.box, options: r.options, call: r.call, done: true });
}

async function refreshDecisions() {
  const q = new URLSearchParams({ limit: "100" });
  if ($("f-outcome").value) q.set("outcome", $("f-outcome").value);
  if ($("f-tool").value.trim()) q.set("tool", $("f-tool").value.trim());
  try {
    const r = await api("GET", "/console/api/decisions?" + q);
    const body = $("decisions");
    body.textContent = "";
    for (const d of r.decisions) {
      const tr = el("tr");
      tr.append(el("td", "", d.time), el("td", "", d.toolName), el("td", "outcome-" + (d.outcome === "allowed" || d.outcome === "denied" ? d.outcome : "failed"), d.outcome),
        el("td", "", d.reason || ""), el("td", "", d.sessionId.slice(0, 8)));
      tr.lastChild.title = d.sessionId;
      body.append(tr);
    }
    let note = r.note || (r.decisions.length ? "" : "No decision matches.");
    if (r.skipped) note += ` ${r.skipped} lines of the log were not decisions.`;
    setText($("decisions-note"), note);
  } catch (e) {
    if (e.status !== 401) setText($("decisions-note"), "decisions: " + e.message);
  }
}

async function act(what, f) {
  try {
    notice("");
    await f();
  } catch (e) {
    if (e.status !== 401) notice(what + ": " + e.message);
  }
}

$("signin-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  $("token").value = "";
  sessionStorage.setItem(TOKEN_KEY, token);
  start();
});
$("signout").addEventListener("click", () => signedOut("signed out: the token is removed from this tab"));
$("new-session").addEventListener("submit", (e) => {
  e.preventDefault();
  act("create session", async () => {
    const r = await api("POST", "/session", { cwd: $("ws").value, sessionScope: "thread", approvalMode: $("mode").value });
    select(r.sessionId);
  });
});
$("prompt-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() || !selected) return;
  act("send prompt", async () => {
    await api("POST", "/session/" + encodeURIComponent(selected) + "/prompt", { prompt: [{ type: "text", text }] });
    $("prompt").value = "";
  });
});
$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    $("prompt-form").requestSubmit();
  }
});
$("cancel").addEventListener("click", () => act("cancel", () => api("POST", "/session/" + encodeURIComponent(selected) + "/cancel")));
$("delete").addEventListener("click", () => {
  if (!selected || !confirm("Delete this session? Its running turn is cancelled.")) return;
  act("delete session", async () => {
    await api("DELETE", "/session/" + encodeURIComponent(selected));
    if (stream) stream.ctrl.abort();
    selected = null;
    $("session-actions").hidden = true;
    $("prompt-form").hidden = true;
    $("pending").textContent = "";
    setText($("session-title"), "No session selected");
    setText($("session-meta"), "");
    refresh();
  });
});
$("decision-filter").addEventListener("submit", (e) => {
  e.preventDefault();
  refreshDecisions();
});

if (badLink) signedOut("the sign-in link's token is not valid: paste the token");
else start();
