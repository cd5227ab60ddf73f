// The sluice dashboard: draws the rules and lists from the admin API,
// then the snapshots the server pushes once a second (rates, top limited
// keys, bans) as server-sent events. Every action calls the admin API, as
// the CLI does; this script has no logic of its own beyond showing and
// confirming. Text from the server is only ever set as textContent.
"use strict";
(() => {
  const csrf = document.querySelector('meta[name="sluice-csrf"]').content;
  const $ = (sel) => document.querySelector(sel);
  const charts = new Map(); // rule name → {plot, mode}
  let ruleNames = "";
  let jails = ["manual"];

  // el builds an element with attributes and children (strings are text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  // api calls the admin API with the session cookie and the CSRF header.
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: { "X-Sluice-CSRF": csrf } };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    if (res.status === 401) {
      location.assign("/admin/login");
      throw new Error("signed out");
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) throw new Error((data && data.error) || res.status + " " + res.statusText);
    return data;
  }

  function notice(msg, failed) {
    const n = $("#notice");
    n.textContent = msg;
    n.classList.toggle("failed", !!failed);
    n.hidden = false;
  }

  // confirmAction asks in the page's dialog; resolves true on Confirm.
  function confirmAction(message) {
    const d = $("#confirm");
    $("#confirm-text").textContent = message;
    d.returnValue = "";
    return new Promise((resolve) => {
      d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
      d.showModal();
    });
  }

  // act confirms message, runs call, reports, and refreshes what it changed.
  async function act(message, call, refresh) {
    if (!(await confirmAction(message))) return;
    try {
      await call();
      notice("Done: " + message.replace(/\?$/, "."));
      if (refresh) await refresh();
    } catch (e) {
      notice("Failed: " + message.replace(/\?$/, "") + ": " + e.message, true);
    }
  }

  const banKey = (k) => (k.startsWith("key:") ? "key:" + k : k);
  const lift = (jail, key) => act(`Lift the ban of ${key} in jail ${jail}?`,
    () => api("DELETE", `/admin/api/bans?jail=${encodeURIComponent(jail)}&key=${encodeURIComponent(banKey(key))}`), refreshBans);
  const ban = (req) => act(`Ban ${req.key} in jail ${req.jail} for ${req.duration || "the jail's ban time"}?`,
    () => api("POST", "/admin/api/bans", req), refreshBans);

  function duration(seconds) {
    if (seconds <= 0) return "0s";
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = Math.floor(seconds % 60);
    return (h ? h + "h" : "") + (m ? m + "m" : "") + (!h && s ? s + "s" : "") || "0s";
  }
  const rate = (v) => (v >= 100 ? Math.round(v) : Math.round(v * 10) / 10).toString();
  const last = (xs) => (xs && xs.length ? xs[xs.length - 1] : 0);

  async function loadRules() {
    const rules = await api("GET", "/admin/api/rules");
    const body = $("#rules tbody");
    body.replaceChildren(...rules.map((r) => el("tr", { "data-rule": r.name },
      el("td", {}, el("code", {}, r.name)),
      el("td", {}, r.limits.join(", ")),
      el("td", { "data-mode": r.mode }, r.mode === "shadow" ? "shadow (dry run)" : r.mode),
      el("td", {}, r.failure),
      el("td", { "data-health": r.name }, "…"),
      el("td", { class: "num", "data-rate": "allowed" }, "…"),
      el("td", { class: "num", "data-rate": "denied" }, "…"))));
    const js = new Set(["manual"]);
    for (const r of rules) for (const j of r.jails || []) js.add(j);
    jails = [...js];
    $("#ban-form select").replaceChildren(...jails.map((j) => el("option", {}, j)));
  }

  async function loadLists() {
    for (const name of ["allow", "deny"]) {
      const { entries } = await api("GET", "/admin/api/lists/" + name);
      const ul = $(`.list[data-list="${name}"] ul`);
      ul.replaceChildren(...(entries.length ? entries.map((e) => el("li", {},
        el("code", {}, e),
        el("button", { type: "button", class: "danger", "data-action": "unlist", "data-entry": e,
          onclick: () => act(`Remove ${e} from the ${name} list?`,
            () => api("DELETE", `/admin/api/lists/${name}?entry=${encodeURIComponent(e)}`), loadLists) },
        "Remove"))) : [el("li", { class: "hint" }, "empty")]));
    }
  }

  async function refreshBans() {
    const bans = await api("GET", "/admin/api/bans");
    drawBans(bans, bans.length, "");
  }

  // reconcile makes the rows of tbody those of items, in order, keeping
  // the row of each key (so that a click in progress is not lost) and
  // updating it in place; placeholder is shown when there are none.
  function reconcile(tbody, items, keyOf, build, update, placeholder) {
    const old = new Map();
    for (const r of tbody.children) if (r.dataset.k !== undefined) old.set(r.dataset.k, r);
    const rows = items.map((it) => {
      const k = keyOf(it);
      let r = old.get(k);
      if (r) old.delete(k);
      else { r = build(it); r.dataset.k = k; }
      update(r, it);
      return r;
    });
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 9, class: "empty" }, placeholder)));
    for (const r of [...tbody.children]) if (r.dataset.k === undefined || old.has(r.dataset.k)) r.remove();
    rows.forEach((r, i) => { if (tbody.children[i] !== r) tbody.insertBefore(r, tbody.children[i] || null); });
    while (tbody.children.length > rows.length) tbody.lastChild.remove();
  }

  // cell sets the text of the cell of field f in row r, if it changed.
  function cell(r, f, text, cls) {
    const c = r.querySelector(`[data-f="${f}"]`);
    if (c.textContent !== String(text)) c.textContent = text;
    if (cls !== undefined && c.className !== cls) c.className = cls;
  }

  function drawBans(bans, total, err) {
    const now = Date.now() / 1000;
    $("#bans-summary").textContent = err ? "⚠ " + err
      : total > bans.length ? `${total} bans in force; the ${bans.length} first shown.` : `${total} ban${total === 1 ? "" : "s"} in force.`;
    reconcile($("#bans tbody"), bans, (b) => b.jail + "\n" + b.key,
      (b) => el("tr", { "data-ban": b.key, "data-jail": b.jail },
        el("td", {}, b.jail), el("td", {}, el("code", {}, b.key)), el("td", { "data-f": "reason" }),
        el("td", { "data-f": "since" }), el("td", { "data-f": "left" }), el("td", { class: "num", "data-f": "offences" }),
        el("td", { class: "num", "data-f": "collateral" }),
        el("td", {}, el("button", { type: "button", class: "danger", "data-action": "lift", "data-key": b.key, "data-jail": b.jail,
          onclick: () => lift(b.jail, b.key) }, "Lift"))),
      (r, b) => {
        cell(r, "reason", b.reason);
        cell(r, "since", new Date(b.since).toLocaleTimeString());
        cell(r, "left", duration(Date.parse(b.until) / 1000 - now));
        cell(r, "offences", b.offences);
        cell(r, "collateral", b.collateral > 0 ? `+${b.collateral} ${b.collateral_unit}` : "—", b.collateral > 0 ? "num warn" : "num");
      }, "No bans.");
  }

  // drawQuota shows the edge quotas' buckets: the edges holding each,
  // the shares assigned to them, and what they reported deciding.
  function drawQuota(buckets) {
    reconcile($("#quota tbody"), buckets, (q) => q.bucket,
      (q) => el("tr", { "data-bucket": q.bucket },
        el("td", {}, el("code", {}, q.bucket === "-" ? "(unknown)" : q.bucket)),
        el("td", { class: "num", "data-f": "clients" }), el("td", { class: "num", "data-f": "assigned" }),
        el("td", { class: "num", "data-f": "blankets" }), el("td", { class: "num", "data-f": "allowed" }),
        el("td", { class: "num", "data-f": "denied" })),
      (r, q) => {
        cell(r, "clients", q.clients);
        cell(r, "assigned", q.assigned);
        cell(r, "blankets", q.blankets);
        cell(r, "allowed", q.allowed);
        cell(r, "denied", q.denied);
      }, "No edge quotas reported.");
  }

  // drawStrikes tells the failures the jails could not count (or counted
  // without those before): a store at its cap forgot them, decided on an
  // estimate, or failed.
  function drawStrikes(jails) {
    const p = $("#strikes-lost");
    const lost = jails.map((j) => {
      const by = Object.entries(j.strikes_lost).map(([why, n]) => `${n} ${why}`).join(", ");
      return `${j.name}: ${by}`;
    });
    p.textContent = lost.length ? "⚠ Strikes not counted — " + lost.join("; ") + "." : "Every strike counted.";
    p.className = lost.length ? "hint warn" : "hint";
  }

  function drawRates(s) {
    for (const r of s.rules) {
      const row = $(`#rules tr[data-rule="${CSS.escape(r.name)}"]`);
      if (!row) continue;
      row.querySelector('[data-rate="allowed"]').textContent = rate(last(r.allowed));
      row.querySelector('[data-rate="denied"]').textContent = rate(last(r.denied));
      const h = row.querySelector("[data-health]");
      h.textContent = { ok: "✓ ok", errors: "⚠ errors", failing: "✗ failing: policy answers" }[r.health] || r.health;
      h.className = "health-" + r.health;
      drawChart(r, s.times);
    }
  }

  function drawChart(r, times) {
    const data = [times, r.allowed, r.denied];
    let c = charts.get(r.name);
    if (c && c.mode === r.mode) {
      c.plot.setData(data);
      return;
    }
    if (c) c.box.remove();
    const box = el("div", { class: "chart", "data-chart": r.name }, el("h3", {}, el("code", {}, r.name),
      r.mode === "shadow" ? " (shadow: would deny)" : ""));
    $("#charts").append(box);
    const width = Math.max(box.clientWidth, 260);
    const plot = new uPlot({
      width, height: 170,
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
      series: [{},
        { label: "allowed/s", stroke: "#1b7f3b", width: 2 },
        { label: r.mode === "shadow" ? "would deny/s" : "denied/s", stroke: "#b3261e", width: 2, dash: [6, 4] }],
      axes: [{}, { size: 50 }],
    }, data, box);
    charts.set(r.name, { plot, box, mode: r.mode });
  }

  function keyState(r, t) {
    return {
      banned: "✗ banned" + (t.ban ? ` (${t.ban.jail})` : ""),
      denied: (r.mode === "shadow" ? "▲ would be denied now (dry run)" : "▲ denied now") + `, retry in ${duration(Math.ceil(t.retry_after || 0))}`,
      allowed: "✓ allowed now", unknown: "? unknown",
    }[t.state] || t.state;
  }

  function keyAction(r, t) {
    if (t.state === "banned" && t.ban) {
      return el("button", { type: "button", class: "danger", "data-action": "lift", "data-key": t.ban.key, "data-jail": t.ban.jail,
        onclick: () => lift(t.ban.jail, t.ban.key) }, "Lift ban");
    }
    return el("button", { type: "button", "data-action": "ban", "data-key": t.key,
      onclick: () => ban({ jail: "manual", key: banKey(t.key), duration: "1h", reason: `top limited key of ${r.name}` }) }, "Ban 1h");
  }

  function drawTop(s) {
    const items = [];
    for (const r of s.rules) for (const t of r.top || []) items.push({ r, t });
    reconcile($("#top tbody"), items, ({ r, t }) => r.name + "\n" + t.key,
      ({ r, t }) => el("tr", { "data-rule": r.name, "data-key": t.key },
        el("td", {}, el("code", {}, r.name)), el("td", {}, el("span", { class: "key" }, t.key)),
        el("td", { class: "num", "data-f": "denials" }), el("td", { "data-f": "state" }), el("td", { "data-f": "action" })),
      (row, { r, t }) => {
        cell(row, "denials", t.error ? `${t.denials} (≥ ${t.denials - t.error})` : t.denials);
        cell(row, "state", keyState(r, t), "state-" + t.state);
        const sig = t.state + (t.ban ? "\n" + t.ban.jail + "\n" + t.ban.key : "");
        if (row.dataset.sig !== sig) {
          row.dataset.sig = sig;
          row.dataset.state = t.state;
          row.querySelector('[data-f="action"]').replaceChildren(keyAction(r, t));
        }
      }, "No denials in the window.");
    const w = s.rules.length ? s.rules[0].top_window : 60;
    $("#top-window").textContent = `The keys each rule denied most over the last ${duration(w)}, and their state now.`;
  }

  function onSnapshot(s) {
    const names = s.rules.map((r) => r.name).join("\n");
    if (names !== ruleNames) {
      ruleNames = names;
      loadRules().then(() => drawRates(s)).catch((e) => notice("Failed to load the rules: " + e.message, true));
      for (const [name, c] of charts) if (!s.rules.some((r) => r.name === name)) { c.box.remove(); charts.delete(name); }
    } else {
      drawRates(s);
    }
    drawTop(s);
    drawBans(s.bans || [], s.bans_total, s.bans_error);
    drawStrikes(s.jails || []);
    drawQuota(s.quota || []);
    const st = $("#status");
    st.dataset.state = "live";
    st.textContent = "live — updated " + new Date(s.time).toLocaleTimeString();
  }

  function connect() {
    const es = new EventSource("/admin/api/events");
    es.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data)));
    es.onerror = () => {
      const st = $("#status");
      st.dataset.state = "down";
      st.textContent = "disconnected — reconnecting…";
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 3000);
    };
  }

  $("#ban-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const req = { jail: f.get("jail"), key: f.get("key").trim(), reason: f.get("reason").trim() };
    if (f.get("duration").trim()) req.duration = f.get("duration").trim();
    ban(req);
  });
  for (const form of document.querySelectorAll(".list-form")) {
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      const name = form.closest(".list").dataset.list;
      const entry = new FormData(form).get("entry").trim();
      act(`Add ${entry} to the ${name} list?`, () => api("POST", "/admin/api/lists/" + name, { entry }),
        async () => { form.reset(); await loadLists(); });
    });
  }
  $("#logout").addEventListener("click", async () => {
    await api("POST", "/admin/logout").catch(() => {});
    location.assign("/admin/login");
  });
  window.addEventListener("resize", () => {
    for (const c of charts.values()) c.plot.setSize({ width: Math.max(c.box.clientWidth, 260), height: 170 });
  });

  loadRules().then(loadLists).catch((e) => notice("Failed to load: " + e.message, true));
  connect();
})();
