// Activity: the requests in flight, fed by GET /v1/requests/live (server-sent events
// read with fetch, parsed by the toolkit's SSEParser), their tokens, cost and elapsed
// time updating while they stream; then the recent ones from the request-list API,
// filtered and paged; a row opens its whole record and a picture of its life.
import { SSEParser } from "./toolkit.js";
import { el, ms, orDash, row, seconds, usd, when } from "./api.js";
import { pages } from "./forms.js";
import { drawLife } from "./life.js";

const $ = (id) => document.getElementById(id);
const LIVE_INTERVAL_MS = 250;
const RETRY_MS = 2000;
const PAGE = 50;
const MOST_SAMPLED = 200;

export class Activity {
  constructor(api, role) {
    this.api = api;
    this.role = role;
    this.records = new Map();
    this.feed = null;
    this.selected = null;
    this.samples = new Map();  // request id → [[ms, tokens], …] seen on the live feed
    this.cursors = [];  // the cursor of each page shown before this one
    this.cursor = null;
    this.next = null;
    this.names = new Map();  // account and key ids → names (admin key)
  }

  start() {
    $("filters").addEventListener("submit", (event) => {
      event.preventDefault();
      this.first();
    });
    $("newest").addEventListener("click", () => this.first());
    $("older").addEventListener("click", () => {
      this.cursors.push(this.cursor);
      this.cursor = this.next;
      this.refresh();
    });
    if (this.role === "admin") {
      $("filter-account-label").hidden = false;
      this.loadNames();
    }
    this.listen();
    this.refresh();
  }

  first() {
    this.cursors = [];
    this.cursor = null;
    this.refresh();
  }

  /** Accounts' and their keys' names, for the columns and the account filter. */
  async loadNames() {
    const accounts = await pages(this.api, "/admin/accounts").catch(() => []);
    const select = $("filter-account");
    select.replaceChildren(el("option", "any", { value: "" }), ...accounts.map((a) => el("option", a.name, { value: a.name })));
    await Promise.all(accounts.map(async (account) => {
      this.names.set(account.id, account.name);
      const keys = await pages(this.api, `/admin/accounts/${encodeURIComponent(account.name)}/keys`).catch(() => []);
      for (const key of keys) this.names.set(key.id, key.name ? `${key.name} (${key.prefix})` : key.prefix);
    }));
    this.refresh();
  }

  /** A name where the page knows it, else the id shortened (whole in the record). */
  nameOf(id) {
    return this.names.get(id) ?? short(id);
  }

  stop() {
    this.feed?.abort();
  }

  shown() {
    this.refresh();
  }

  async listen() {
    this.feed = new AbortController();
    const signal = this.feed.signal;
    while (!signal.aborted) {
      try {
        await this.readFeed(signal);
      } catch (error) {
        if (signal.aborted) return;
        $("live-state").textContent = `(reconnecting: ${error.message})`;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  async readFeed(signal) {
    const response = await fetch(`/v1/requests/live?interval_ms=${LIVE_INTERVAL_MS}`, {
      headers: this.api.headers({ Accept: "text/event-stream" }),
      signal,
    });
    if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
    $("live-state").textContent = "(live)";
    const parser = new SSEParser();
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the feed ended");
      for (const data of parser.feed(value)) this.snapshot(JSON.parse(data));
    }
  }

  snapshot(event) {
    const body = $("live").tBodies[0];
    body.replaceChildren(...event.requests.map((record) => this.liveRow(record)));
    if (event.requests.length === 0) body.append(row(["nothing in flight"], { class: "muted" }));
    if (event.finished.length) this.refresh();
    if (this.selected && event.requests.some((r) => r.id === this.selected)) this.open(this.selected);
  }

  liveRow(record) {
    this.records.set(record.id, record);
    const seen = this.samples.get(record.id) ?? [];
    if (seen.length < MOST_SAMPLED) seen.push([record.duration_ms, record.completion_tokens]);
    this.samples.set(record.id, seen);
    const tr = row([
      record.id, this.nameOf(record.account_id), orDash(record.requested_model), seconds(record.duration_ms),
      String(record.completion_tokens), usd(record.cost),
    ], { "data-id": record.id, class: "clickable" });
    tr.cells[4].classList.add("tokens");
    tr.cells[5].classList.add("cost");
    tr.onclick = () => {
      this.open(record.id);
      $("record").scrollIntoView({ block: "nearest" });  // below the table on a narrow screen
    };
    return tr;
  }

  async refresh() {
    const query = new URLSearchParams({ limit: String(PAGE) });
    const filters = { status: $("filter-status").value, model: $("filter-model").value.trim(),
      key: $("filter-key").value.trim(), account: $("filter-account").value };
    for (const [name, value] of Object.entries(filters)) if (value) query.set(name, value);
    if (this.role !== "admin") query.delete("account");
    if (this.cursor) query.set("cursor", this.cursor);
    const path = this.role === "admin" ? "/admin/requests" : "/v1/requests";
    try {
      const page = await this.api.json(`${path}?${query}`);
      $("recent").tBodies[0].replaceChildren(...page.data.map((record) => this.recentRow(record)));
      if (page.data.length === 0) $("recent").tBodies[0].append(row(["no requests"], { class: "muted" }));
      this.next = page.has_more ? page.next_cursor : null;
      $("older").disabled = this.next === null;
      $("newest").disabled = this.cursor === null;
      const from = this.cursors.length * PAGE;
      $("page-note").textContent = page.data.length ? `${from + 1}–${from + page.data.length}, newest first` : "";
      if (this.selected && this.records.has(this.selected)) this.open(this.selected);
    } catch (error) {
      $("recent").tBodies[0].replaceChildren(row([`could not list: ${error.message}`], { class: "error" }));
    }
  }

  /** Opens a record the page may not list (the playground's link): read through the
   * key that made it, once the log has it. */
  async openById(id, via) {
    for (let tries = 0; tries < 30 && !this.records.has(id); tries++) {
      const found = await via.json(`/v1/requests/${encodeURIComponent(id)}`).catch(() => null);
      if (found) this.records.set(id, found);
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    this.open(id);
    $("record").scrollIntoView({ block: "nearest" });
  }

  recentRow(record) {
    this.records.set(record.id, record);
    const tokens = `${record.prompt_tokens} + ${record.completion_tokens}`;
    const tr = row([
      short(record.id), when(record.created_at).slice(5), this.nameOf(record.account_id), this.nameOf(record.key_id),
      orDash(record.served_model ?? record.requested_model), statusOf(record), orDash(record.error_code),
      tokens, usd(record.cost), ms(record.ttft_ms),
    ], { "data-id": record.id, class: "clickable" });
    tr.cells[0].title = record.id;
    tr.cells[5].classList.add("status");
    tr.cells[6].classList.add("code");
    tr.onclick = () => this.open(record.id);
    return tr;
  }

  open(id) {
    const record = this.records.get(id);
    if (!record) return;
    this.selected = id;
    $("record").hidden = false;
    $("record-id").textContent = id;
    const refund = record.credits_held === null || record.credits_charged === null
      ? null : record.credits_held - record.credits_charged;
    const summary = [
      ["Status", statusOf(record)], ["HTTP status", record.http_status || "–"],
      ["Account", `${this.names.get(record.account_id) ?? ""} ${record.account_id}`.trim()],
      ["Key", `${this.names.get(record.key_id) ?? ""} ${record.key_id}`.trim()],
      ["Model", `${orDash(record.requested_model)} → ${orDash(record.served_model)}`],
      ["Route", `${orDash(record.route)} ${record.route_name ? `(${record.route_name})` : ""}`],
      ["Provider", `${orDash(record.provider)} via ${orDash(record.connection)}`],
      ["Tokens", `${record.prompt_tokens} in, ${record.completion_tokens} out`],
      ["Cost", usd(record.cost)], ["Held", usd(record.credits_held)],
      ["Charged", usd(record.credits_charged)], ["Refunded", usd(refund)],
      ["Cancel", orDash(record.disconnect)], ["TTFT", ms(record.ttft_ms)],
      ["Duration", ms(record.duration_ms)],
      ["Error", record.error_type ? `${record.error_type} ${orDash(record.error_code)}: ${orDash(record.error_message)}` : "–"],
    ];
    $("record-summary").replaceChildren(...summary.flatMap(([name, value]) => [
      el("dt", name), el("dd", value, { "data-field": name.toLowerCase().replace(/ /g, "-") }),
    ]));
    $("record-attempts").tBodies[0].replaceChildren(...record.attempts.map((a) => row([
      orDash(a.position), orDash(a.connection), orDash(a.provider), orDash(a.outcome),
      ms(a.latency_ms), orDash(a.code),
    ])));
    drawLife($("record-life"), $("record-life-note"), record, this.samples.get(id) ?? []);
    const notes = record.guardrails.map((g) => el("li", `${g.name} (${g.stage}): ${g.action}, ${g.outcome}`));
    $("record-guardrails").replaceChildren(...(notes.length ? notes : [el("li", "none", { class: "muted" })]));
  }
}

/** An id as a table shows it, `req_…WkTf8IK8` (whole in the record and its title). */
function short(id) {
  return `${id.slice(0, id.indexOf("_") + 1)}…${id.slice(-8)}`;
}

/** The status as a person reads it: a cancelled stream says so. */
function statusOf(record) {
  return record.disconnect === "cancel" && record.status !== "complete" ? "cancelled" : record.status;
}
