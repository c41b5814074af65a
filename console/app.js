// The pushdispatch console: plain JavaScript over the operations API (/ops/v1, SPEC §13).
// Everything shown is built with textContent (never HTML from the service or a provider).
"use strict";

const state = { csrf: null, samples: [], pollTimer: null, events: null };

function el(tag, attributes, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.setAttribute("class", value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function time(ms) {
  if (ms === null || ms === undefined) return "–";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

// A span of milliseconds from now, as people say it: "in 52 min", "3 s ago".
function relative(ms) {
  const seconds = Math.round(Math.abs(ms) / 1000);
  const text = seconds < 90 ? `${seconds} s` : seconds < 5400 ? `${Math.round(seconds / 60)} min` : `${(seconds / 3600).toFixed(1)} h`;
  return ms >= 0 ? `in ${text}` : `${text} ago`;
}

function fixed(value, digits) {
  return value === null || value === undefined ? "–" : Number(value).toFixed(digits);
}

async function api(path, options) {
  const init = { method: "GET", credentials: "same-origin", headers: {} };
  if (options && options.body !== undefined) {
    init.method = options.method || "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  } else if (options && options.method) {
    init.method = options.method;
  }
  if (init.method !== "GET" && state.csrf) init.headers["X-CSRF-Token"] = state.csrf;
  const response = await fetch(path, init);
  let json = null;
  try { json = await response.json(); } catch (error) { json = null; }
  if (response.status === 401) { showSignIn(); }
  if (!response.ok) {
    const message = json && json.message ? json.message : `${response.status} ${response.statusText}`;
    throw new Error(message);
  }
  return json;
}

function page() { return document.getElementById("page"); }

function render(...nodes) {
  page().replaceChildren(...nodes.filter((node) => node !== null && node !== undefined));
}

function failure(error) {
  return el("p", { class: "error", role: "alert" }, String(error.message || error));
}

function outcomeCell(outcome) {
  return el("td", { class: `outcome-${outcome}` }, outcome);
}

function attemptsTable(items, showSubscription) {
  if (!items.length) return el("p", { class: "muted" }, "No attempt recorded.");
  const head = ["When", "Attempt", "Provider", "Destination", "Record", "Status", "Latency", "Outcome", "Next try", "Reason"];
  if (showSubscription) head.push("Subscription");
  return el("div", { class: "scroll" }, el("table", {},
    el("thead", {}, el("tr", {}, head.map((title) => el("th", { scope: "col" }, title)))),
    el("tbody", {}, items.map((a) => el("tr", {},
      el("td", {}, time(a.at)), el("td", { class: "num" }, a.attempt), el("td", {}, a.provider), el("td", {}, a.destination ?? "–"),
      el("td", {}, a.seq === null ? "–" : el("a", { href: `#/records/${encodeURIComponent(a.app)}/${a.seq}` }, `${a.app}:${a.seq}`)),
      el("td", { class: "num" }, a.status ?? "–"), el("td", { class: "num" }, a.latencyMs === undefined ? "–" : `${a.latencyMs} ms`),
      outcomeCell(a.outcome), el("td", {}, a.nextAt ? time(a.nextAt) : "–"), el("td", { class: "mono" }, a.reason ?? ""),
      showSubscription ? el("td", { class: "mono" }, el("a", { href: `#/subscription/${encodeURIComponent(a.app)}/${encodeURIComponent(a.subscription)}` }, a.subscription)) : null,
    )))));
}

// ---- Charts: the last 15 minutes, sampled by this page while it is open.

function chart(title, values, unit) {
  const width = 600, height = 140, left = 44, bottom = 18;
  const max = Math.max(1, ...values.map((v) => v.y));
  const now = Date.now(), span = 15 * 60 * 1000;
  const x = (t) => left + ((t - (now - span)) / span) * (width - left - 6);
  const y = (v) => 6 + (1 - v / max) * (height - bottom - 12);
  const points = values.map((v) => `${x(v.t).toFixed(1)},${y(v.y).toFixed(1)}`).join(" ");
  const svg = el("svg:svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}: ${values.length ? values[values.length - 1].y : 0} ${unit} now, at most ${max} over the last 15 minutes` },
    el("svg:line", { class: "axis", x1: left, y1: height - bottom, x2: width, y2: height - bottom }),
    el("svg:line", { class: "axis", x1: left, y1: 4, x2: left, y2: height - bottom }),
    el("svg:text", { x: 2, y: 14 }, String(max)),
    el("svg:text", { x: 2, y: height - bottom }, "0"),
    el("svg:text", { x: left, y: height - 3 }, "−15 min"),
    el("svg:text", { x: width - 30, y: height - 3 }, "now"),
    values.length > 1 ? el("svg:polyline", { class: "line", points }) : null);
  return el("figure", {}, svg, el("figcaption", {}, `${title} (${unit}), last 15 minutes`));
}

// ---- Pages

async function overview() {
  const data = await api("/ops/v1/overview");
  const rate = (data.senders || []).reduce((sum, s) => sum + (s.perSecond1m || 0), 0);
  state.samples.push({ t: Date.now(), rate, depth: data.outbox ? data.outbox.depth || 0 : 0 });
  state.samples = state.samples.filter((s) => s.t > Date.now() - 15 * 60 * 1000);
  const tiles = (data.senders || []).map((s) => el("section", { class: "tile", "aria-label": `${s.app} ${s.provider}` },
    el("h3", {}, `${s.app} · ${s.provider}${s.destination ? " · " + s.destination : ""}`),
    el("dl", {},
      el("dt", {}, "Rate (1 min)"), el("dd", {}, `${fixed(s.perSecond1m, 2)} /s`),
      el("dt", {}, "Rate (5 min)"), el("dd", {}, `${fixed(s.perSecond5m, 2)} /s`),
      el("dt", {}, "Success"), el("dd", {}, s.successRatio === null ? "–" : `${fixed(s.successRatio * 100, 1)} %`),
      el("dt", {}, "Latency p50 / p99"), el("dd", {}, `${s.p50Ms ?? "–"} / ${s.p99Ms ?? "–"} ms`),
      el("dt", {}, "429s (5 min)"), el("dd", {}, s.tooManyRequests5m),
      ...(s.pacing ? [
        el("dt", {}, "Budget"), el("dd", { class: "wrap" }, `${fixed(s.pacing.budgetPerSecond, 0)} /s, pace ${fixed(s.pacing.perSecond, 0)} /s`),
        el("dt", {}, "Quota answers · waits"), el("dd", {}, `${s.pacing.refusals} · ${s.pacing.waited}`)] : []),
      el("dt", {}, "Sent by"), el("dd", { class: "wrap" }, (s.instances || []).join(", ") || "–"),
      el("dt", {}, "State"), el("dd", { class: s.paused ? "error wrap" : "" }, s.paused ? `paused${s.paused.instance ? " on " + s.paused.instance : ""}: ${s.paused.reason}` : "sending"))));
  const sending = data.sending || {};
  const summary = el("section", { class: "tile", "aria-label": "Service" },
    el("h3", {}, `Instance ${data.instance}`),
    el("dl", {},
      el("dt", {}, "Ready"), el("dd", {}, data.ready ? "yes" : "no"),
      el("dt", {}, "Outbox"), el("dd", {}, `${data.outbox ? data.outbox.depth : "–"} waiting`),
      el("dt", {}, "Oldest waiting"), el("dd", {}, data.outbox && data.outbox.oldestAgeSeconds !== null ? `${data.outbox.oldestAgeSeconds} s` : "–"),
      el("dt", {}, "In flight"), el("dd", {}, `${sending.inFlight ?? 0} of ${sending.maximumInFlight ?? "–"}`),
      el("dt", {}, "Limits"), el("dd", { class: "wrap" }, `${sending.perProviderLimit ?? "–"} per provider, ${sending.perAppLimit ?? "–"} per app`),
      el("dt", {}, "History"), el("dd", { class: "wrap" }, data.history && data.history.on ? `kept ${Math.round(data.history.maxAgeMs / 86400000)} d, ${data.history.maxRows} rows` : "off"),
      ...Object.entries(data.lagMs || {}).flatMap(([app, lag]) => [el("dt", {}, `Lag ${app}`), el("dd", {}, `${(lag / 1000).toFixed(1)} s`)])));
  const instances = (data.instances || []).length ? el("div", {}, el("h3", {}, "Instances"), el("div", { class: "scroll" }, el("table", { id: "instances-table" },
    el("thead", {}, el("tr", {}, ["Name", "Role", "Address", "Live", "Started", "Heartbeat", "In flight", "Owns"].map((t) => el("th", { scope: "col" }, t)))),
    el("tbody", {}, data.instances.map((i) => el("tr", {}, el("td", {}, i.name), el("td", {}, i.role ?? "–"), el("td", {}, i.address ?? "–"),
      el("td", {}, i.live ? "yes" : "no"), el("td", {}, time(i.startedAt)), el("td", {}, `${i.heartbeatAgeSeconds} s ago`),
      el("td", {}, i.sending ? `${i.sending.inFlight} of ${i.sending.maximumInFlight}` : "–"),
      el("td", { class: "wrap" }, (i.owns || []).join(", ") || "–"))))))) : null;
  const when = (ms) => ms === null || ms === undefined ? "–" : relative(ms - data.now);
  const credentials = (data.credentials || []).length ? el("div", {}, el("h3", {}, "Credentials"), el("div", { class: "scroll" }, el("table", { id: "credentials-table" },
    el("thead", {}, el("tr", {}, ["App", "Provider", "Whose", "State", "Issued", "Expires", "Renewed", "Last failure", "Instance"].map((t) => el("th", { scope: "col" }, t)))),
    el("tbody", {}, data.credentials.map((c) => el("tr", {},
      el("td", {}, c.app), el("td", {}, c.provider + (c.origins !== null ? ` (${c.origins} push services)` : "")), el("td", { class: "anywhere" }, c.identity),
      el("td", { class: c.state === "failing" || c.state === "refused" ? "error" : "" }, c.state),
      el("td", {}, when(c.issuedAt)), el("td", {}, when(c.expiresAt)), el("td", {}, when(c.renewsAt)),
      el("td", { class: "wrap" }, c.failure ? `${when(c.failure.at)}: ${c.failure.reason}` : "–"), el("td", {}, c.instance ?? "–"))))))) : null;
  render(el("h2", {}, "Overview"),
    el("div", { class: "tiles" }, summary, ...tiles),
    tiles.length ? null : el("p", { class: "muted" }, "No delivery in the last five minutes."),
    el("div", { class: "charts" },
      chart("Deliveries per second", state.samples.map((s) => ({ t: s.t, y: Math.round(s.rate * 100) / 100 })), "per second"),
      chart("Outbox depth", state.samples.map((s) => ({ t: s.t, y: s.depth })), "notifications")),
    credentials,
    instances);
}

function live() {
  const list = el("tbody", {});
  const filter = el("select", { id: "live-outcome" },
    el("option", { value: "" }, "every attempt"), el("option", { value: "failures" }, "failures only"),
    ...["delivered", "retry", "revoked", "dropped", "discarded", "paused"].map((o) => el("option", { value: o }, o)));
  const status = el("p", { class: "muted", id: "live-status" }, "Connecting…");
  render(el("h2", {}, "Live attempts"),
    el("form", { class: "inline", onsubmit: (e) => e.preventDefault() }, el("div", {}, el("label", { for: "live-outcome" }, "Show"), filter)),
    status,
    el("div", { class: "scroll" }, el("table", { id: "live-table" },
      el("thead", {}, el("tr", {}, ["When", "App", "Provider", "Subscription", "Record", "Status", "Latency", "Outcome", "Reason"].map((t) => el("th", { scope: "col" }, t)))),
      list)));
  const source = new EventSource("/ops/v1/events");
  state.events = source;
  source.addEventListener("open", () => { status.textContent = "Connected: attempts appear as they are settled."; });
  source.addEventListener("error", () => { status.textContent = "Disconnected; reconnecting…"; });
  source.addEventListener("attempt", (event) => {
    const a = JSON.parse(event.data);
    const wanted = filter.value;
    if (wanted === "failures" && a.outcome === "delivered") return;
    if (wanted && wanted !== "failures" && a.outcome !== wanted) return;
    list.prepend(el("tr", {},
      el("td", {}, time(a.at)), el("td", {}, a.app), el("td", {}, a.provider),
      el("td", { class: "mono" }, el("a", { href: `#/subscription/${encodeURIComponent(a.app)}/${encodeURIComponent(a.subscription)}` }, a.subscription)),
      el("td", {}, a.seq === null ? "–" : el("a", { href: `#/records/${encodeURIComponent(a.app)}/${a.seq}` }, `${a.app}:${a.seq}`)),
      el("td", { class: "num" }, a.status ?? "–"), el("td", { class: "num" }, a.latencyMs === undefined ? "–" : `${a.latencyMs} ms`),
      outcomeCell(a.outcome), el("td", { class: "mono" }, a.reason ?? "")));
    while (list.children.length > 500) list.lastChild.remove();
  });
}

function searchForm(values) {
  const field = (name, label, type) => el("div", {}, el("label", { for: `search-${name}` }, label),
    el("input", { id: `search-${name}`, name, type: type || "text", value: values[name] || "", autocomplete: type === "password" ? "new-password" : "off" }));
  return el("form", { class: "inline", id: "search-form", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    const query = new URLSearchParams();
    for (const [key, value] of data.entries()) if (value) query.set(key, value);
    location.hash = `#/subscriptions?${query.toString()}`;
  } }, field("app", "Application"), field("uid", "User id"), field("path", "Path"), field("token", "Device token (whole)", "password"),
    el("button", { type: "submit" }, "Search"));
}

async function subscriptions(query) {
  const values = Object.fromEntries(new URLSearchParams(query || ""));
  const form = searchForm(values);
  if (!Object.values(values).some(Boolean)) {
    render(el("h2", {}, "Subscriptions"), form, el("p", { class: "muted" }, "Search by application, user, path or whole device token."));
    return;
  }
  render(el("h2", {}, "Subscriptions"), form, el("p", { class: "muted" }, "Searching…"));
  const params = new URLSearchParams(values);
  params.set("limit", "100");
  const data = await api(`/ops/v1/subscriptions?${params.toString()}`);
  const rows = data.items.map((s) => el("tr", {},
    el("td", { class: "mono" }, el("a", { href: `#/subscription/${encodeURIComponent(s.app)}/${encodeURIComponent(s.id)}` }, s.id)),
    el("td", {}, s.app), el("td", {}, s.uid), el("td", {}, s.provider), el("td", { class: "mono" }, s.path),
    el("td", { class: "mono" }, s.token ? `${s.token.head}…${s.token.tail} (sha256 ${s.token.sha256})` : (s.destination || "–")),
    s.lastAttempt ? outcomeCell(s.lastAttempt.outcome) : el("td", { class: "muted" }, "none")));
  render(el("h2", {}, "Subscriptions"), form,
    rows.length ? el("div", { class: "scroll" }, el("table", { id: "subscription-results" },
      el("thead", {}, el("tr", {}, ["Id", "App", "User", "Provider", "Path", "Token", "Last outcome"].map((t) => el("th", { scope: "col" }, t)))),
      el("tbody", {}, rows))) : el("p", {}, "No subscription matches."),
    data.nextCursor ? el("p", { class: "muted" }, "More match: narrow the search.") : null);
}

async function subscription(app, id) {
  const data = await api(`/ops/v1/subscriptions/${encodeURIComponent(app)}/${encodeURIComponent(id)}/history?limit=200`);
  render(el("h2", {}, "Subscription timeline"),
    el("p", { class: "mono" }, `${app} · ${id}`),
    el("p", { class: "muted" }, "Every attempt, newest first."),
    attemptsTable(data.items, false));
}

function recordForm(app, seq) {
  return el("form", { class: "inline", id: "record-form", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    location.hash = `#/records/${encodeURIComponent(data.get("app"))}/${encodeURIComponent(data.get("seq"))}`;
  } },
  el("div", {}, el("label", { for: "record-app" }, "Application"), el("input", { id: "record-app", name: "app", required: true, value: app || "" })),
  el("div", {}, el("label", { for: "record-seq" }, "Record seq"), el("input", { id: "record-seq", name: "seq", required: true, inputmode: "numeric", value: seq || "" })),
  el("button", { type: "submit" }, "Look up"));
}

async function records(app, seq) {
  if (!app) { render(el("h2", {}, "Records"), recordForm(), el("p", { class: "muted" }, "What a change record caused, and who got nothing and why.")); return; }
  const data = await api(`/ops/v1/records/${encodeURIComponent(app)}/${encodeURIComponent(seq)}`);
  const notifications = data.notifications.map((n) => el("section", { class: "notification" },
    el("h3", {}, `Notification ${n.notification}${n.kind ? " (" + n.kind + ")" : ""}, ${n.state}, for `,
      el("a", { class: "mono", href: `#/subscription/${encodeURIComponent(app)}/${encodeURIComponent(n.subscription)}` }, n.subscription)),
    attemptsTable(n.attempts, false)));
  const nothing = data.nothing.length ? el("div", {}, el("h3", {}, "Got nothing"), el("div", { class: "scroll" }, el("table", { id: "record-nothing" },
    el("thead", {}, el("tr", {}, ["Subscription", "Why"].map((t) => el("th", { scope: "col" }, t)))),
    el("tbody", {}, data.nothing.map((s) => el("tr", {}, el("td", { class: "mono" }, s.subscription), el("td", {}, s.why))))))) : null;
  render(el("h2", {}, `Record ${app}:${seq}`), recordForm(app, seq),
    notifications.length || nothing ? null : el("p", {}, "This record caused nothing that the history still holds."),
    ...notifications, nothing);
}

async function senders() {
  const data = await api("/ops/v1/senders");
  const message = el("p", { role: "status", id: "senders-message" });
  const rows = data.items.map((s) => el("tr", {},
    el("td", {}, s.app), el("td", {}, s.provider), el("td", {}, s.destination ?? "–"), el("td", {}, time(s.since)), el("td", {}, time(s.probeAt)),
    el("td", { class: "mono" }, s.reason), el("td", {}, s.instance ?? "–"),
    el("td", {}, el("button", { type: "button", "aria-label": `Resume ${s.app} ${s.provider}${s.destination ? " " + s.destination : ""}`, onclick: async () => {
      try {
        await api("/ops/v1/senders/resume", { body: { app: s.app, provider: s.provider, destination: s.destination } });
        message.textContent = `Resumed ${s.app}/${s.provider}${s.destination ? "/" + s.destination : ""}.`;
        setTimeout(route, 300);
      } catch (error) { message.textContent = String(error.message); }
    } }, "Resume"))));
  render(el("h2", {}, "Paused senders"), message,
    rows.length ? el("div", { class: "scroll" }, el("table", { id: "senders-table" },
      el("thead", {}, el("tr", {}, ["App", "Provider", "Destination", "Since", "Next probe", "Reason", "Instance", ""].map((t) => el("th", { scope: "col" }, t || el("span", { class: "muted" }, "Action"))))),
      el("tbody", {}, rows))) : el("p", {}, "No sender is paused."));
}

async function deadletters() {
  const data = await api("/ops/v1/deadletter?limit=500");
  const message = el("p", { role: "status", id: "deadletter-message" });
  const redrive = async (dryRun) => {
    try {
      const r = await api("/ops/v1/deadletter/redrive", { body: { dryRun } });
      message.textContent = `${dryRun ? "Would apply" : "Applied"} ${r.applied}; still refused ${r.refused}; redriven before ${r.alreadyRedriven}; refused for their seq (never redriven) ${r.notRedrivable}.`;
    } catch (error) { message.textContent = String(error.message); }
  };
  const rows = data.items.map((d) => el("tr", {}, el("td", {}, time(d.ts)), el("td", {}, d.source), el("td", { class: "num" }, d.position),
    el("td", {}, d.app ?? "–"), el("td", { class: "num" }, d.seq ?? "–"), el("td", { class: "mono" }, d.reason),
    el("td", { class: "mono" }, `${d.line.head}${d.line.bytes > d.line.head.length ? "…" : ""} (${d.line.bytes} bytes, sha256 ${d.line.sha256})`)));
  render(el("h2", {}, "Dead letters"),
    el("p", { class: "muted" }, "Lines this instance refused at ingestion, oldest first, and why. A line is shown by its start, length and digest: it holds a record's data. After a fix (a limit raised, a new version), Redrive applies those that pass now, once each, in order."),
    el("p", {}, el("button", { type: "button", class: "secondary", id: "deadletter-check", onclick: () => redrive(true) }, "Check (dry run)"), " ",
      el("button", { type: "button", id: "deadletter-redrive", onclick: () => redrive(false) }, "Redrive")),
    message,
    rows.length ? el("div", { class: "scroll" }, el("table", { id: "deadletter-table" },
      el("thead", {}, el("tr", {}, ["When", "Source", "Position", "App", "Seq", "Reason", "Line"].map((t) => el("th", { scope: "col" }, t)))),
      el("tbody", {}, rows))) : el("p", {}, "No dead letter."),
    data.nextCursor ? el("p", { class: "muted" }, "More: use pushdispatch deadletter list.") : null);
}

function rules() {
  const result = el("div", { id: "rules-result", role: "status" });
  render(el("h2", {}, "Rules playground"),
    el("p", { class: "muted" }, "Whether a user may read a path under the application's read rules, rule by rule (as pushdispatch rules check --path)."),
    el("form", { id: "rules-form", onsubmit: async (event) => {
      event.preventDefault();
      const data = new FormData(event.target);
      let auth = null;
      try { auth = data.get("auth").trim() ? JSON.parse(data.get("auth")) : null; } catch (error) { result.replaceChildren(failure(new Error("auth: not valid JSON"))); return; }
      try {
        const answer = await api("/ops/v1/rules/simulate", { body: { app: data.get("app"), path: data.get("path"), auth } });
        result.replaceChildren(
          el("p", { class: answer.allowed ? "outcome-delivered" : "outcome-revoked" }, `read ${data.get("path")}: ${answer.allowed ? "allowed" : "denied"}${answer.grantedBy ? " by " + answer.grantedBy : ""}`),
          answer.trace.length ? el("div", { class: "scroll" }, el("table", {},
            el("thead", {}, el("tr", {}, ["Rule", "At", "Outcome"].map((t) => el("th", { scope: "col" }, t)))),
            el("tbody", {}, answer.trace.map((t) => el("tr", {}, el("td", { class: "mono" }, t.rule), el("td", { class: "mono" }, t.path), el("td", {}, t.outcome))))))
            : el("p", { class: "muted" }, "No .read rule on the way."));
      } catch (error) { result.replaceChildren(failure(error)); }
    } },
    el("div", { class: "inline" },
      el("div", {}, el("label", { for: "rules-app" }, "Application"), el("input", { id: "rules-app", name: "app", required: true })),
      el("div", {}, el("label", { for: "rules-path" }, "Path"), el("input", { id: "rules-path", name: "path", required: true, value: "/" }))),
    el("label", { for: "rules-auth" }, "auth (JSON, or empty for a signed-out reader)"),
    el("textarea", { id: "rules-auth", name: "auth" }, '{"uid":"alice"}'),
    el("p", {}, el("button", { type: "submit" }, "Check"))),
    result);
}

// ---- Routing, sign-in

async function route() {
  if (state.pollTimer) { clearInterval(state.pollTimer); state.pollTimer = null; }
  if (state.events) { state.events.close(); state.events = null; }
  const hash = location.hash || "#/overview";
  const [path, query] = hash.slice(1).split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const name = parts[0] || "overview";
  for (const link of document.querySelectorAll("nav a")) {
    if (link.dataset.page === (name === "subscription" ? "subscriptions" : name)) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  try {
    switch (name) {
      case "overview":
        await overview();
        state.pollTimer = setInterval(() => overview().catch(() => {}), 2000);
        break;
      case "live": live(); break;
      case "subscriptions": await subscriptions(query); break;
      case "subscription": await subscription(parts[1], parts[2]); break;
      case "records": await records(parts[1], parts[2]); break;
      case "senders": await senders(); break;
      case "deadletters": await deadletters(); break;
      case "rules": rules(); break;
      default: render(el("h2", {}, "Not found"), el("p", {}, "No such page."));
    }
  } catch (error) {
    render(el("h2", {}, "Error"), failure(error));
  }
  document.title = `pushdispatch · ${name}`;
}

function showSignIn() {
  document.getElementById("signin").hidden = false;
  document.getElementById("nav").hidden = true;
  document.getElementById("signout").hidden = true;
  page().replaceChildren();
  document.getElementById("signin-token").focus();
}

function signedIn(session) {
  state.csrf = session.csrf || null;
  document.getElementById("signin").hidden = true;
  document.getElementById("nav").hidden = false;
  document.getElementById("signout").hidden = !!session.open;
  route();
}

async function start() {
  document.getElementById("signin-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("signin-error");
    error.textContent = "";
    const input = document.getElementById("signin-token");
    const response = await fetch("/console/session", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token: input.value }) });
    input.value = "";
    const json = await response.json().catch(() => null);
    if (!response.ok) { error.textContent = json && json.message ? json.message : "Sign-in refused."; return; }
    signedIn(json);
  });
  document.getElementById("signout").addEventListener("click", async () => {
    await fetch("/console/session", { method: "DELETE", credentials: "same-origin", headers: { "X-CSRF-Token": state.csrf || "" } }).catch(() => {});
    state.csrf = null;
    showSignIn();
  });
  window.addEventListener("hashchange", () => { if (!document.getElementById("nav").hidden) route(); });
  const response = await fetch("/console/session", { credentials: "same-origin" });
  const session = await response.json().catch(() => ({}));
  if (session.signedIn) signedIn(session); else showSignIn();
}

document.addEventListener("DOMContentLoaded", start);
