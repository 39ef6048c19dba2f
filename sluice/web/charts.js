// Overview: the last 24 hours of the request log by hour (requests, time to first
// token p50/p95, tokens per second, error rate, cost by model) and spend by day over
// 30 days, drawn on canvases here: no chart library, no external service. An API key
// sees its own account's, the admin key every account's.
import { el, usd } from "./api.js";

const $ = (id) => document.getElementById(id);
const HOURS = 24;
const DAYS = 30;
const MOST_ROWS = 2000;
const COLORS = Object.freeze(["#1f6feb", "#d97706", "#137333", "#9333ea", "#b42318", "#0e7490", "#6b7684"]);
const INK = "#6b7684";

export class Overview {
  constructor(api, role) {
    this.api = api;
    this.prefix = role === "admin" ? "/admin" : "/v1";
  }

  start() {
    $("overview-refresh").addEventListener("click", () => this.refresh());
  }

  shown() {
    this.refresh();
  }

  async refresh() {
    await Promise.all([this.hourly(), this.spend()]);
  }

  async hourly() {
    const now = Math.floor(Date.now() / 1000);
    const since = (Math.floor(now / 3600) - HOURS + 1) * 3600;
    const { rows, more } = await this.rows(since);
    const hours = Array.from({ length: HOURS }, (_, i) => since + i * 3600);
    const buckets = hours.map(() => []);
    for (const record of rows) buckets[Math.floor((record.created_at - since) / 3600)]?.push(record);
    const labels = hours.map((h) => new Date(h * 1000).toISOString().slice(11, 13));
    $("overview-note").textContent = `${rows.length} requests${more ? ` (the newest ${MOST_ROWS})` : ""}`;
    bars($("chart-requests"), labels, [{ values: buckets.map((b) => b.length) }], String);
    const ttfts = buckets.map((b) => sorted(b.map((r) => r.ttft_ms)));
    lines($("chart-ttft"), labels, [
      { name: "p50", values: ttfts.map((v) => quantile(v, 0.5)) },
      { name: "p95", values: ttfts.map((v) => quantile(v, 0.95)) },
    ], (v) => `${Math.round(v)}`);
    const rates = buckets.map((b) => quantile(sorted(b.filter((r) => r.stream).map((r) => r.tokens_per_second)), 0.5));
    lines($("chart-rate"), labels, [{ name: "tokens/s", values: rates }], (v) => v.toFixed(0));
    const failed = (r) => r.status === "error" || r.status === "incomplete";
    const errors = buckets.map((b) => (b.length ? b.filter(failed).length / b.length : null));
    lines($("chart-errors"), labels, [{ name: "errors", values: errors }], (v) => `${Math.round(v * 100)} %`);
    this.byModel(labels, buckets);
  }

  byModel(labels, buckets) {
    const models = new Map();
    buckets.forEach((bucket, i) => {
      for (const record of bucket) {
        const name = record.served_model ?? record.requested_model ?? "none";
        if (!models.has(name)) models.set(name, Array(labels.length).fill(0));
        models.get(name)[i] += record.cost ?? 0;
      }
    });
    const series = [...models].map(([name, values], i) => ({ name, values, color: COLORS[i % COLORS.length], n: i % COLORS.length }));
    bars($("chart-models"), labels, series, usd);
    $("chart-models-legend").replaceChildren(...series.map((s) => {
      const total = s.values.reduce((a, b) => a + b, 0);
      return el("li", `${s.name}: ${usd(total)}`, { class: `swatch-${s.n}`, "data-model": s.name });
    }));
  }

  /** The log's rows since a time, newest first, up to MOST_ROWS. */
  async rows(since) {
    const rows = [];
    let cursor = null;
    do {
      const query = new URLSearchParams({ limit: "500", since: String(since) });
      if (cursor) query.set("cursor", cursor);
      const page = await this.api.json(`${this.prefix}/requests?${query}`);
      rows.push(...page.data);
      cursor = page.has_more ? page.next_cursor : null;
    } while (cursor && rows.length < MOST_ROWS);
    return { rows, more: cursor !== null };
  }

  async spend() {
    const since = Math.floor(Date.now() / 1000) - DAYS * 86400;
    const report = await this.api.json(`${this.prefix}/spend?by=day&since=${since}&limit=500`);
    $("spend-total").textContent = `${report.total.requests} requests, ${usd(report.total.spend)} in all`;
    const labels = [];
    for (let i = 0; i <= DAYS; i += 1) labels.push(new Date((since + i * 86400) * 1000).toISOString().slice(0, 10));
    const byDay = new Map(report.data.map((d) => [d.day, d.spend]));
    const canvas = $("spend-chart");
    bars(canvas, labels.map((d) => d.slice(5)), [{ values: labels.map((d) => byDay.get(d) ?? 0) }], usd, 7);
    canvas.dataset.days = String(report.data.length);
  }
}

function sorted(values) {
  return values.filter((v) => v !== null && v !== undefined).sort((a, b) => a - b);
}

/** The q-quantile of sorted values (nearest rank); null when there are none. */
function quantile(values, q) {
  return values.length ? values[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)] : null;
}

/** The frame every chart shares: axes, the top value, and every `every`-th label. */
function frame(canvas, labels, top, format, every) {
  const ctx = canvas.getContext("2d");
  const { width, height } = canvas;
  const pad = { left: 70, right: 10, top: 14, bottom: 24 };
  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = INK;
  ctx.fillText(format(top), 4, pad.top + 4);
  ctx.fillText(format(0), 4, height - pad.bottom);
  const step = (width - pad.left - pad.right) / labels.length;
  labels.forEach((label, i) => {
    if (i % every === 0) ctx.fillText(label, pad.left + i * step, height - 8);
  });
  const y = (value) => height - pad.bottom - (value / top) * (height - pad.top - pad.bottom);
  return { ctx, step, x: (i) => pad.left + i * step, y };
}

/** Stacked bars, one stack per label. */
function bars(canvas, labels, series, format, every = 3) {
  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const top = Math.max(...totals, 0) || 1;
  const { ctx, step, x, y } = frame(canvas, labels, top, format, every);
  labels.forEach((_, i) => {
    let base = 0;
    for (const s of series) {
      const value = s.values[i] ?? 0;
      ctx.fillStyle = s.color ?? COLORS[0];
      ctx.fillRect(x(i) + 1, y(base + value), Math.max(step - 2, 1), y(base) - y(base + value));
      base += value;
    }
  });
  canvas.dataset.total = String(totals.reduce((a, b) => a + b, 0));
}

/** Lines through the labels that have a value (a gap where one has none). */
function lines(canvas, labels, series, format) {
  const all = series.flatMap((s) => s.values).filter((v) => v !== null);
  const top = Math.max(...all, 0) || 1;
  const { ctx, step, x, y } = frame(canvas, labels, top, format, 3);
  series.forEach((s, n) => {
    ctx.strokeStyle = COLORS[n];
    ctx.fillStyle = COLORS[n];
    ctx.beginPath();
    let drawing = false;
    s.values.forEach((value, i) => {
      if (value === null) { drawing = false; return; }
      const [px, py] = [x(i) + step / 2, y(value)];
      if (drawing) ctx.lineTo(px, py); else ctx.moveTo(px, py);
      ctx.fillRect(px - 2, py - 2, 4, 4);
      drawing = true;
    });
    ctx.stroke();
    if (s.name) ctx.fillText(s.name, canvas.width - 60, 14 + n * 12);
  });
  canvas.dataset.points = String(all.length);
  canvas.dataset.last = JSON.stringify(series.map((s) => s.values.filter((v) => v !== null).at(-1) ?? null));
}
