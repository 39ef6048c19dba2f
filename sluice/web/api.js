// The console's calls to its own gateway, and the small helpers every page uses.
// Text from the gateway is always set as textContent, never parsed as HTML.

const API_KEY = /^sk-sluice-[0-9A-Za-z]{40}$/;

/** A non-2xx answer: its status and the gateway's error object, if it sent one. */
export class ApiFailure extends Error {
  constructor(status, body) {
    const error = body && body.error ? body.error : null;
    super(error ? `${status}: ${error.message}` : `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

/** Calls with one key, as `Authorization: Bearer`. */
export class Api {
  constructor(key) {
    this.key = key;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.key}`, ...extra };
  }

  async json(path, init = {}) {
    const response = await fetch(path, { ...init, headers: this.headers(init.headers) });
    const body = await response.json().catch(() => null);
    if (!response.ok) throw new ApiFailure(response.status, body);
    return body;
  }

  /** The role of this key: "api", "admin", or null when the gateway takes neither.
   * A Sluice API key has its own shape; anything else can only be the admin key. */
  async role() {
    const api = API_KEY.test(this.key);
    const probe = api ? "/v1/models" : "/admin/accounts?limit=1";
    const answer = await fetch(probe, { headers: this.headers() });
    if (!answer.ok) return null;
    return api ? "api" : "admin";
  }
}

/** An element with text content and attributes; children appended in order. */
export function el(tag, text = null, attrs = {}, ...children) {
  const node = document.createElement(tag);
  if (text !== null && text !== undefined) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

/** A table row of cells, each a string (as text) or a Node. */
export function row(cells, attrs = {}) {
  const tr = el("tr", null, attrs);
  for (const cell of cells) {
    const td = el("td");
    if (cell instanceof Node) td.append(cell);
    else td.textContent = cell;
    tr.append(td);
  }
  return tr;
}

/** Money as the CLI prints it: `$2.50`, `-$15.00`, `$0.000012345` (at least 2
 * decimals, up to 9 as the amount has). */
export const usd = (value) => {
  if (value === null || value === undefined) return "–";
  const amount = Number(value);
  const [whole, fraction] = Math.abs(amount).toFixed(9).split(".");
  return `${amount < 0 ? "-" : ""}$${whole}.${fraction.replace(/0+$/, "").padEnd(2, "0")}`;
};
export const ms = (value) =>
  value === null || value === undefined ? "–" : `${Math.round(Number(value))} ms`;
export const seconds = (value) => `${(Number(value) / 1000).toFixed(1)} s`;
export const orDash = (value) => (value === null || value === undefined || value === "" ? "–" : String(value));
export const when = (unix) => new Date(unix * 1000).toISOString().replace("T", " ").slice(0, 19);
