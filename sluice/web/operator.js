// The operator view (admin key): accounts and their keys with budgets and spend, spend
// over the last 30 days drawn on a canvas, and the connections with their breaker
// state, error rate and time to first token.
import { el, ms, orDash, row, usd, when } from "./api.js";

const $ = (id) => document.getElementById(id);
const DAYS = 30;
const REFRESH_MS = 5000;

export class Operator {
  constructor(api) {
    this.api = api;
    this.account = null;
    this.timer = null;
  }

  start() {
    this.refresh();
  }

  shown() {
    this.refresh();
    clearInterval(this.timer);
    this.timer = setInterval(() => this.connections(), REFRESH_MS);
  }

  stop() {
    clearInterval(this.timer);
  }

  async refresh() {
    await Promise.all([this.accounts(), this.spend(), this.connections()]);
  }

  async accounts() {
    const accounts = await this.pages("/admin/accounts");
    $("accounts").tBodies[0].replaceChildren(...accounts.map((account) => {
      const tr = row([
        account.name, usd(account.balance), usd(account.held), budget(account),
        usd(account.spent), String(account.open_holds),
      ], { "data-name": account.name, class: "clickable" });
      tr.onclick = () => this.keys(account.name);
      return tr;
    }));
    const wanted = this.account ?? accounts.find((a) => a.name !== "dev")?.name ?? accounts[0]?.name;
    if (wanted) await this.keys(wanted);
  }

  async keys(name) {
    this.account = name;
    for (const tr of $("accounts").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.name === name);
    $("keys-account").textContent = name;
    const keys = await this.pages(`/admin/accounts/${encodeURIComponent(name)}/keys`);
    $("keys").tBodies[0].replaceChildren(...keys.map((key) => row([
      key.prefix, orDash(key.name), key.models ? key.models.join(", ") : "any", budget(key),
      usd(key.spent), key.expires_at ? when(key.expires_at) : "never", key.revoked ? "revoked" : "active",
    ], { "data-prefix": key.prefix })));
  }

  /** Every item of a cursor-paginated listing. */
  async pages(path) {
    const items = [];
    let cursor = null;
    do {
      const query = new URLSearchParams({ limit: "500" });
      if (cursor) query.set("cursor", cursor);
      const page = await this.api.json(`${path}?${query}`);
      items.push(...page.data);
      cursor = page.has_more ? page.next_cursor : null;
    } while (cursor);
    return items;
  }

  async spend() {
    const since = Math.floor(Date.now() / 1000) - DAYS * 86400;
    const report = await this.api.json(`/admin/spend?by=day&since=${since}&limit=500`);
    $("spend-total").textContent = `${report.total.requests} requests, ${usd(report.total.spend)} in all`;
    drawSpend($("spend-chart"), report.data, since);
  }

  async connections() {
    const answer = await this.api.json("/admin/connections");
    $("connections").tBodies[0].replaceChildren(...answer.data.map((c) => {
      const tr = row([
        c.id, c.provider, c.breaker, String(c.requests),
        c.error_rate === null ? "–" : `${(c.error_rate * 100).toFixed(1)} %`, ms(c.mean_ttft_ms),
      ], { "data-id": c.id });
      tr.cells[2].classList.add(`breaker-${c.breaker}`);
      return tr;
    }));
  }
}

function budget(item) {
  return item.budget === null || item.budget === undefined ? "none" : `${usd(item.budget)} ${item.budget_period}`;
}

/** A bar per UTC day on the canvas, drawn here: no chart library, no external service. */
export function drawSpend(canvas, days, since) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 64, right: 12, top: 12, bottom: 28 };
  ctx.clearRect(0, 0, width, height);
  const byDay = new Map(days.map((d) => [d.day, d.spend]));
  const labels = [];
  for (let i = 0; i <= DAYS; i += 1) {
    labels.push(new Date((since + i * 86400) * 1000).toISOString().slice(0, 10));
  }
  const top = Math.max(...labels.map((day) => byDay.get(day) ?? 0), 1e-9);
  const barWidth = (width - pad.left - pad.right) / labels.length;
  ctx.fillStyle = "#6b7684";
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillText(usd(top), 4, pad.top + 8);
  ctx.fillText("$0", 4, height - pad.bottom);
  labels.forEach((day, i) => {
    const value = byDay.get(day) ?? 0;
    const barHeight = (value / top) * (height - pad.top - pad.bottom);
    ctx.fillStyle = "#1f6feb";
    ctx.fillRect(pad.left + i * barWidth + 1, height - pad.bottom - barHeight, barWidth - 2, barHeight);
    if (i % 7 === 0 || i === labels.length - 1) {
      ctx.fillStyle = "#6b7684";
      ctx.fillText(day.slice(5), pad.left + i * barWidth, height - 8);
    }
  });
  canvas.dataset.days = String(days.length);
}
