// The sluice dashboard: draws the rules, the lists and the moment
// (GET /admin/api/live: every rule's decisions by cause over the last
// minutes, the top refused keys), then the snapshots the server pushes
// once a second as server-sent events, each the latest sample; the bans
// a page at a time (GET /admin/api/bans/page, /groups), sorted, filtered
// and grouped by the server. Every action calls the admin API, as the
// CLI does; this script has no logic of its own beyond showing and
// confirming. Text from the server is only ever set as textContent.
"use strict";
(() => {
  const csrf = document.querySelector('meta[name="sluice-csrf"]').content;
  const readOnly = document.body.classList.contains("read-only");
  const $ = (sel) => document.querySelector(sel);
  const charts = new Map(); // rule name → {plot, box, mode, data, legend}
  const maxSamples = 300;
  let ruleNames = "";
  let times = []; // Unix seconds of the samples the charts hold
  let bansChanges = -1;
  let bansQuery = { view: "bans", filter: "", jail: "", sort: "newest", offset: 0 };
  let bansLoading = false, bansAgain = false, bansAt = 0;
  const pageSize = 50;

  // The causes of a rule's decisions, as the snapshots name them, with
  // their labels and line styles (never told apart by colour alone).
  const causes = [
    { key: "allowed", label: "allowed", shadow: "allowed", stroke: "#1b7f3b", dash: [], width: 2 },
    { key: "denied", label: "denied by the limit", shadow: "would deny", stroke: "#b3261e", dash: [6, 4], width: 2 },
    { key: "estimated", label: "denied on an estimate", shadow: "would deny, estimated", stroke: "#8a5a00", dash: [2, 3], width: 2 },
    { key: "banned", label: "refused by a ban", stroke: "#5b2a86", dash: [], width: 3 },
    { key: "deny_list", label: "refused by the deny list", stroke: "#333", dash: [10, 3, 2, 3], width: 2 },
  ];

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

  // at returns the absolute URL of path on this origin: a page opened
  // with credentials in its URL (a wallboard's http://admin:TOKEN@…)
  // cannot fetch a relative URL, which would carry them.
  const at = (path) => location.origin + path;

  // api calls the admin API with the session cookie and the CSRF header.
  async function api(method, path, body) {
    const opts = { method, credentials: "same-origin", headers: { "X-Sluice-CSRF": csrf } };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(at(path), opts);
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
      const out = await call();
      const n = out && out.lifted ? ` (${out.lifted.length} lifted)` : "";
      notice("Done: " + message.replace(/\?$/, "") + n + ".");
      if (refresh) await refresh();
    } catch (e) {
      notice("Failed: " + message.replace(/\?$/, "") + ": " + e.message, true);
    }
  }

  const banKey = (k) => (k.startsWith("key:") ? "key:" + k : k);
  const lift = (jail, key) => act(`Lift the ban of ${key} in jail ${jail}?`,
    () => api("DELETE", `/admin/api/bans?jail=${encodeURIComponent(jail)}&key=${encodeURIComponent(banKey(key))}`), refreshBans);
  const liftWithin = (net, jail, n) => act(`Lift the ${n} ban${n === 1 ? "" : "s"} within ${net}${jail ? " in jail " + jail : ""}?`,
    () => api("DELETE", `/admin/api/bans?within=${encodeURIComponent(net)}` + (jail ? `&jail=${encodeURIComponent(jail)}` : "")), refreshBans);
  const ban = (req) => act(`Ban ${req.key} in jail ${req.jail} for ${req.duration || "the jail's ban time"}?`,
    () => api("POST", "/admin/api/bans", req), refreshBans);

  // duration writes seconds as 1h2m, 3m4s or 5s.
  function duration(seconds) {
    if (seconds <= 0) return "0s";
    const h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = Math.floor(seconds % 60);
    return (h ? h + "h" : "") + (m ? m + "m" : "") + (!h && s ? s + "s" : "") || "0s";
  }
  const pad = (n) => String(Math.floor(Math.abs(n))).padStart(2, "0");
  // iso writes a time in ISO 8601 in this browser's zone, with its offset.
  function iso(d) {
    const off = -d.getTimezoneOffset();
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
      `${off < 0 ? "-" : "+"}${pad(off / 60)}:${pad(off % 60)}`;
  }
  // clock writes a time of day with its zone.
  const clock = (d) => d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  // relative writes how long ago (or in how long) a time is; its title,
  // the ISO time.
  function relative(cell, t) {
    const d = new Date(t), s = Math.round((d.getTime() - Date.now()) / 1000);
    const text = s >= 0 ? "in " + duration(s) : duration(-s) + " ago";
    if (cell.textContent !== text) cell.textContent = text;
    const title = iso(d);
    if (cell.title !== title) cell.title = title;
  }
  const rate = (v) => (v >= 100 ? Math.round(v) : Math.round(v * 10) / 10).toLocaleString() + "/s";
  const count = (n) => Number(n || 0).toLocaleString("en-US");
  const last = (xs) => (xs && xs.length ? xs[xs.length - 1] : 0);

  async function loadRules() {
    const rules = await api("GET", "/admin/api/rules");
    $("#rules tbody").replaceChildren(...rules.map((r) => el("tr", { "data-rule": r.name },
      el("td", {}, el("code", {}, r.name)),
      el("td", {}, r.limits.join(", ")),
      el("td", { "data-mode": r.mode }, r.mode === "shadow" ? "shadow (dry run)" : r.mode),
      el("td", {}, r.failure),
      el("td", { "data-health": r.name }, "…"),
      ...causes.map((c) => el("td", { class: "num", "data-cause": c.key },
        el("span", { class: "rate", "data-rate": c.key }, "…"), el("span", { class: "total", "data-total": c.key }, "…"))))));
    const js = new Set(["manual"]);
    for (const r of rules) for (const j of r.jails || []) js.add(j);
    $("#ban-form select").replaceChildren(...[...js].map((j) => el("option", {}, j)));
    const q = $('#bans-query select[name="jail"]');
    q.replaceChildren(el("option", { value: "" }, "every jail"), ...[...js].map((j) => el("option", {}, j)));
    q.value = bansQuery.jail;
  }

  async function loadLists() {
    for (const name of ["allow", "deny"]) {
      const { entries } = await api("GET", "/admin/api/lists/" + name);
      const ul = $(`.list[data-list="${name}"] ul`);
      ul.replaceChildren(...(entries.length ? entries.map((e) => el("li", {},
        el("code", {}, e),
        el("button", { type: "button", class: "danger act", "data-action": "unlist", "data-entry": e,
          onclick: () => act(`Remove ${e} from the ${name} list?`,
            () => api("DELETE", `/admin/api/lists/${name}?entry=${encodeURIComponent(e)}`), loadLists) },
        "Remove"))) : [el("li", { class: "hint" }, "empty")]));
    }
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
    if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 10, class: "empty" }, placeholder)));
    for (const r of [...tbody.children]) if (r.dataset.k === undefined || old.has(r.dataset.k)) r.remove();
    rows.forEach((r, i) => { if (tbody.children[i] !== r) tbody.insertBefore(r, tbody.children[i] || null); });
    while (tbody.children.length > rows.length) tbody.lastChild.remove();
  }

  // cell sets the text of the cell of field f in row r, if it changed.
  function cell(r, f, text, cls) {
    const c = r.querySelector(`[data-f="${f}"]`);
    if (c.textContent !== String(text)) c.textContent = text;
    if (cls !== undefined && c.className !== cls) c.className = cls;
    return c;
  }

  // refreshBans fetches the page of bans or groups the query asks for;
  // one request at a time, and one more if asked meanwhile.
  async function refreshBans() {
    if (bansLoading) { bansAgain = true; return; }
    bansLoading = true;
    try {
      do {
        bansAgain = false;
        const q = bansQuery, p = new URLSearchParams({ offset: q.offset, limit: pageSize });
        if (q.filter) p.set("filter", q.filter);
        if (q.jail) p.set("jail", q.jail);
        if (q.view === "groups") drawGroups(await api("GET", "/admin/api/bans/groups?" + p), q);
        else { p.set("sort", q.sort); drawBans(await api("GET", "/admin/api/bans/page?" + p), q); }
        bansAt = Date.now();
      } while (bansAgain);
    } catch (e) {
      $("#bans-summary").textContent = "⚠ The bans cannot be listed now: " + e.message;
    } finally {
      bansLoading = false;
    }
  }

  function drawPager(offset, shown, total, what) {
    $("#page-at").textContent = total ? `${count(offset + 1)}–${count(offset + shown)} of ${count(total)} ${what}` : "";
    $("#page-prev").disabled = offset === 0;
    $("#page-next").disabled = offset + shown >= total;
  }

  function drawBans(page, q) {
    const jails = Object.entries(page.jails || {}).sort().map(([j, n]) => `${j} ${count(n)}`).join(", ");
    $("#bans-summary").textContent = `${count(page.all)} ban${page.all === 1 ? "" : "s"} in force` + (jails ? ` (${jails})` : "") + "." +
      (q.filter || q.jail ? ` ${count(page.total)} match.` : "");
    $("#groups-view").hidden = true;
    $("#bans-view").hidden = false;
    drawPager(page.offset, page.bans.length, page.total, "bans");
    reconcile($("#bans tbody"), page.bans, (b) => b.jail + "\n" + b.key,
      (b) => el("tr", { "data-ban": b.key, "data-jail": b.jail },
        el("td", {}, b.jail), el("td", {}, el("code", {}, b.key)), el("td", { "data-f": "reason", class: "reason" }),
        el("td", { "data-f": "since" }), el("td", { "data-f": "left" }), el("td", { class: "num", "data-f": "offences" }),
        el("td", { class: "num", "data-f": "refused" }), el("td", { class: "num", "data-f": "collateral" }),
        el("td", { class: "act" }, el("button", { type: "button", class: "danger", "data-action": "lift", "data-key": b.key, "data-jail": b.jail,
          onclick: () => lift(b.jail, b.key) }, "Lift"))),
      (r, b) => {
        cell(r, "reason", b.reason);
        relative(r.querySelector('[data-f="since"]'), b.since);
        relative(r.querySelector('[data-f="left"]'), b.until);
        cell(r, "offences", b.offences);
        cell(r, "refused", count(b.refused));
        cell(r, "collateral", b.collateral > 0 ? `+${b.collateral} ${b.collateral_unit}` : "—", b.collateral > 0 ? "num warn" : "num");
      }, q.filter || q.jail ? "No bans match." : "No bans.");
  }

  function drawGroups(page, q) {
    $("#bans-summary").textContent = `${count(page.total)} group${page.total === 1 ? "" : "s"} of bans by /24 (IPv4) and /64 (IPv6)` +
      (page.keys ? `; ${count(page.keys)} bans of keys that are no address.` : ".");
    $("#bans-view").hidden = true;
    $("#groups-view").hidden = false;
    drawPager(page.offset, page.groups.length, page.total, "groups");
    reconcile($("#groups tbody"), page.groups, (g) => g.network,
      (g) => el("tr", { "data-group": g.network },
        el("td", {}, el("code", {}, g.network)), el("td", { class: "num", "data-f": "bans" }), el("td", { class: "num", "data-f": "refused" }),
        el("td", { "data-f": "jails" }), el("td", { "data-f": "newest" }),
        el("td", {},
          el("button", { type: "button", class: "quiet", "data-action": "show", onclick: () => showGroup(g.network) }, "Show"),
          el("button", { type: "button", class: "danger act", "data-action": "lift-group", "data-network": g.network,
            onclick: () => liftWithin(g.network, q.jail, g.bans) }, "Lift all"))),
      (r, g) => {
        cell(r, "bans", count(g.bans));
        cell(r, "refused", count(g.refused));
        cell(r, "jails", g.jails.join(", "));
        relative(r.querySelector('[data-f="newest"]'), g.newest);
      }, "No bans of addresses.");
  }

  // showGroup lists the bans of a group.
  function showGroup(net) {
    const f = $("#bans-query");
    f.elements.view.value = "bans";
    f.elements.filter.value = net;
    f.elements.sort.value = "key";
    readQuery();
  }

  // readQuery takes the query of the bans' form, from the first page.
  function readQuery() {
    const f = $("#bans-query").elements;
    bansQuery = { view: f.view.value, filter: f.filter.value.trim(), jail: f.jail.value, sort: f.sort.value, offset: 0 };
    f.sort.disabled = bansQuery.view === "groups";
    refreshBans();
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
    let refused = 0, all = 0, byBan = 0;
    for (const r of s.rules) {
      const row = $(`#rules tr[data-rule="${CSS.escape(r.name)}"]`);
      if (!row) continue;
      for (const c of causes) {
        row.querySelector(`[data-rate="${c.key}"]`).textContent = rate(last(r[c.key]));
        row.querySelector(`[data-total="${c.key}"]`).textContent = count(r.totals[c.key]);
        all += r.totals[c.key];
        if (c.key !== "allowed") refused += r.totals[c.key];
      }
      byBan += r.totals.banned;
      const h = row.querySelector("[data-health]");
      h.textContent = { ok: "✓ ok", errors: "⚠ errors", failing: "✗ failing: policy answers" }[r.health] || r.health;
      h.className = "health-" + r.health;
    }
    const pct = all ? ` (${Math.round((refused / all) * 1000) / 10}%)` : "";
    $("#refused-summary").textContent = `Since the service started: ${count(refused)} refused of ${count(all)} decisions${pct}; ` +
      `${count(byBan)} of them by bans.` + (s.rules_left_out ? ` ${s.rules_left_out} rules left out of the live view to keep it small.` : "");
  }

  // addSamples adds the samples of a snapshot to the charts' data: all of
  // them when it holds the last minutes (history), else those newer than
  // the charts'. A rule new to the charts starts with zeros.
  function addSamples(s, history) {
    if (history) times = [];
    let from = s.times.findIndex((t) => !times.length || t > times[times.length - 1]);
    if (from < 0) from = s.times.length;
    const all = times.concat(s.times.slice(from));
    const drop = Math.max(0, all.length - maxSamples);
    for (const r of s.rules) {
      let c = charts.get(r.name);
      if (!c || c.mode !== r.mode) c = newChart(r);
      c.data = causes.map((k, i) => {
        const xs = (c.data && !history ? c.data[i] : []).concat(r[k.key].slice(from));
        return new Array(Math.max(0, all.length - xs.length)).fill(0).concat(xs).slice(drop);
      });
    }
    times = all.slice(drop);
    for (const [name, c] of charts) {
      if (!s.rules.some((r) => r.name === name)) { c.box.remove(); charts.delete(name); continue; }
      c.plot.setData([times, ...c.data]);
      legend(c, null);
    }
  }

  // newChart makes the chart of rule r, with its legend under it.
  function newChart(r) {
    const old = charts.get(r.name);
    if (old) old.box.remove();
    const box = el("div", { class: "chart", "data-chart": r.name }, el("h3", {}, el("code", {}, r.name),
      r.mode === "shadow" ? " (shadow: would deny)" : ""));
    $("#charts").append(box);
    const width = Math.max(box.clientWidth, 260);
    const c = { box, mode: r.mode, data: null };
    c.plot = new uPlot({
      width, height: 170,
      legend: { show: false },
      cursor: { points: { show: false } },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
      series: [{}, ...causes.map((k) => ({ label: label(k, r.mode), stroke: k.stroke, width: k.width, dash: k.dash }))],
      axes: [{}, { size: 50 }],
      hooks: { setCursor: [(u) => legend(c, u.cursor.idx)] },
    }, [[], ...causes.map(() => [])], box);
    c.legend = el("ul", { class: "legend" }, ...causes.map((k) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.borderTopColor = k.stroke;
      swatch.style.borderTopStyle = k.dash.length ? (k.dash[0] <= 2 ? "dotted" : "dashed") : "solid";
      swatch.style.borderTopWidth = k.width + "px";
      return el("li", { "data-series": k.key }, swatch, label(k, r.mode) + " ", el("b", { class: "value" }, "–"));
    }), el("li", { class: "at" }));
    box.append(c.legend);
    charts.set(r.name, c);
    return c;
  }

  const label = (k, mode) => (mode === "shadow" && k.shadow ? k.shadow : k.label) + "/s";

  // legend shows the values of sample idx under the chart, the latest
  // when idx is null (no cursor over the chart), with the sample's time.
  function legend(c, idx) {
    if (!c.legend || !c.data) return;
    const i = idx == null ? times.length - 1 : idx;
    c.legend.querySelectorAll("[data-series] .value").forEach((v, k) => {
      v.textContent = i >= 0 && c.data[k][i] != null ? rate(c.data[k][i]) : "–";
    });
    const at = c.legend.querySelector(".at");
    at.textContent = i < 0 ? "" : idx == null ? "now" : "at " + clock(new Date(times[i] * 1000));
    at.title = i < 0 ? "" : iso(new Date(times[i] * 1000));
  }

  function keyState(r, t) {
    return {
      banned: "✗ banned" + (t.ban ? ` (${t.ban.jail}, ${count(t.ban.refused)} refused)` : ""),
      "deny-list": "✗ on the deny list",
      "allow-list": "✓ on the allow list",
      denied: (r.mode === "shadow" ? "▲ would be denied now (dry run)" : "▲ denied now") + `, retry in ${duration(Math.ceil(t.retry_after || 0))}`,
      allowed: "✓ allowed now", unknown: "? unknown",
    }[t.state] || t.state;
  }

  function keyAction(r, t) {
    if (t.state === "banned" && t.ban) {
      return el("button", { type: "button", class: "danger", "data-action": "lift", "data-key": t.ban.key, "data-jail": t.ban.jail,
        onclick: () => lift(t.ban.jail, t.ban.key) }, "Lift ban");
    }
    if (t.hashed || t.state === "deny-list") return el("span", { class: "hint", title: t.hashed ? "a key longer than 128 bytes, known by its digest" : "" }, "—");
    return el("button", { type: "button", "data-action": "ban", "data-key": t.key,
      onclick: () => ban({ jail: "manual", key: banKey(t.key), duration: "1h", reason: `top refused key of ${r.name}` }) }, "Ban 1h");
  }

  function drawTop(s) {
    const items = [];
    for (const r of s.rules) for (const t of r.top || []) items.push({ r, t });
    reconcile($("#top tbody"), items, ({ r, t }) => r.name + "\n" + t.key,
      ({ r, t }) => el("tr", { "data-rule": r.name, "data-key": t.key },
        el("td", {}, el("code", {}, r.name)), el("td", {}, el("span", { class: "key" }, t.key)),
        el("td", { class: "num", "data-f": "refusals" }), el("td", { "data-f": "state" }), el("td", { "data-f": "action", class: "act" })),
      (row, { r, t }) => {
        cell(row, "refusals", t.error ? `${count(t.refusals)} (≥ ${count(t.refusals - t.error)})` : count(t.refusals));
        cell(row, "state", keyState(r, t), "state-" + t.state);
        const sig = t.state + (t.ban ? "\n" + t.ban.jail + "\n" + t.ban.key : "");
        if (row.dataset.sig !== sig) {
          row.dataset.sig = sig;
          row.dataset.state = t.state;
          row.querySelector('[data-f="action"]').replaceChildren(keyAction(r, t));
        }
      }, "No refusals in the window.");
    const w = s.rules.length ? s.rules[0].top_window : 60;
    $("#top-window").textContent = `The keys each rule refused most, for any cause, over the last ${duration(w)}, and their state now.` +
      (s.trimmed ? " Some were left out to keep the live feed small." : "");
  }

  // onSnapshot draws a snapshot: the moment with the last minutes
  // (history), or the latest sample of the feed.
  function onSnapshot(s, history) {
    const names = s.rules.map((r) => r.name).join("\n");
    if (names !== ruleNames) {
      ruleNames = names;
      loadRules().then(() => drawRates(s)).catch((e) => notice("Failed to load the rules: " + e.message, true));
    } else {
      drawRates(s);
    }
    if (!history && times.length && s.times.length && s.times[0] > times[times.length - 1] + 3) {
      loadLive(); // samples were missed: draw the last minutes again
    } else {
      addSamples(s, history);
    }
    drawTop(s);
    drawStrikes(s.jails || []);
    if (history || bansChanges < 0) {
      bansChanges = s.bans_changes; // the page's first fetch of bans is under way
    } else if (s.bans_changes !== bansChanges || (bansQuery.sort === "refused" && Date.now() - bansAt > 5000)) {
      bansChanges = s.bans_changes;
      refreshBans();
    }
    drawQuota(s.quota || []);
    const st = $("#status");
    st.dataset.state = "live";
    st.textContent = "live — updated " + clock(new Date(s.time));
  }

  async function loadLive() {
    onSnapshot(await api("GET", "/admin/api/live"), true);
  }

  // connect streams the feed; after a disconnection, it draws the last
  // minutes again, which the stream's latest samples alone would not.
  function connect() {
    const es = new EventSource(at("/admin/api/events"));
    let lost = false;
    es.addEventListener("snapshot", (e) => onSnapshot(JSON.parse(e.data), false));
    es.onerror = () => {
      lost = true;
      const st = $("#status");
      st.dataset.state = "down";
      st.textContent = "disconnected — reconnecting…";
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 3000);
    };
    es.onopen = () => { if (lost) loadLive().catch(() => {}); };
  }

  $("#ban-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    const req = { jail: f.get("jail"), key: f.get("key").trim(), reason: f.get("reason").trim() };
    if (f.get("duration").trim()) req.duration = f.get("duration").trim();
    ban(req);
  });
  const query = $("#bans-query");
  query.addEventListener("change", readQuery);
  query.addEventListener("submit", (e) => { e.preventDefault(); readQuery(); });
  let typing;
  query.elements.filter.addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(readQuery, 300); });
  $("#page-prev").addEventListener("click", () => { bansQuery.offset = Math.max(0, bansQuery.offset - pageSize); refreshBans(); });
  $("#page-next").addEventListener("click", () => { bansQuery.offset += pageSize; refreshBans(); });
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
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  $("#zone").textContent = `Times in ${zone} (UTC${iso(new Date()).slice(19)}). Hover over a chart for the values of a second; the legend shows the latest.`;
  if (readOnly) $("#lists-hint").textContent += " Signed in read-only: nothing here can be changed.";

  Promise.all([loadRules().then(loadLists), loadLive(), refreshBans()])
    // drawn: the milliseconds from the page's load to the frame that
    // shows it all, for tests and the curious.
    .then(() => requestAnimationFrame(() => setTimeout(() => { document.body.dataset.drawn = String(Math.round(performance.now())); })))
    .catch((e) => notice("Failed to load: " + e.message, true));
  connect();
})();
