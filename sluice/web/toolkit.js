// Sluice's consumer toolkit in JavaScript: one streamed chat completion, read the way
// the Python toolkit (sluice/client) reads it, with the same end states and rules.
// A dependency-free ES module for browsers and Node >= 20 (global fetch, ReadableStream,
// TextDecoder, AbortController, performance). Times are seconds, as in Python.
//
//   import { streamChat } from "./toolkit.js";
//   const result = await streamChat({ baseUrl, apiKey, model: "sluice/demo",
//     messages: [{ role: "user", content: "Hi" }], onEvent: (e) => { ... } });
//   result.state  // "complete" | "truncated" | "incomplete" | "error"

/** @typedef {"complete"|"truncated"|"incomplete"|"error"} StreamState */
/** @typedef {{type: string, message: string, code: string|null, status: number|null, retryAfter: number|null}} ErrorInfo */
/** @typedef {{promptTokens: number, completionTokens: number, totalTokens: number, cachedTokens: number, reasoningTokens: number, cost: number|null, priceSource: string|null}} Usage */
/** @typedef {{index: number, id: string|null, name: string, arguments: string, validJson: boolean, parsed: any}} ToolCall */
/** @typedef {{index: number, text: string, reasoning: string, toolCalls: ToolCall[], finishReason: string|null}} ChoiceResult */
/**
 * @typedef {{type: "content", text: string, choice: number}
 *   | {type: "reasoning", text: string, choice: number}
 *   | {type: "tool_call", index: number, arguments: string, id: string|null, name: string|null, choice: number}
 *   | {type: "usage", usage: Usage}} StreamEvent
 */
/**
 * @typedef {{state: StreamState, ok: boolean, text: string, reasoning: string, toolCalls: ToolCall[],
 *   finishReason: string|null, choices: ChoiceResult[], usage: Usage|null, creditsUsed: number|null,
 *   error: ErrorInfo|null, requestId: string|null, requestedModel: string|null, model: string|null,
 *   provider: string|null, connection: string|null, route: string|null, routeName: string|null,
 *   ttft: number|null, tokensPerSecond: number|null, duration: number, attempts: number}} StreamResult
 */
/** @typedef {{firstEvent?: number|null, idle?: number|null, total?: number|null}} Timeouts */
/** @typedef {{maxAttempts?: number, baseDelay?: number, maxDelay?: number, maxRetryAfter?: number}} RetryPolicy */

export const DEFAULT_TIMEOUTS = Object.freeze({ firstEvent: 120, idle: 150, total: null });
export const DEFAULT_RETRY = Object.freeze({ maxAttempts: 3, baseDelay: 0.5, maxDelay: 8, maxRetryAfter: 60, maxResumes: 3 });
export const RETRYABLE_STATUSES = Object.freeze(new Set([408, 429, 502, 503, 504]));
export const RETRYABLE_TYPES = Object.freeze(new Set([
  "rate_limit_error", "upstream_error", "service_unavailable", "request_timeout",
  "connection_error", // client-side: refused, reset, closed before any content
]));
export const NEVER_RETRIED = Object.freeze(new Set([
  "invalid_request_error", "authentication_error", "budget_exceeded", "permission_error",
  "model_not_found", "guardrail_blocked", "guardrail_unavailable", "invalid_response", "cancelled",
]));
const STATUS_TYPES = Object.freeze({
  400: "invalid_request_error", 401: "authentication_error", 402: "budget_exceeded",
  403: "permission_error", 404: "not_found", 408: "request_timeout", 429: "rate_limit_error",
  502: "upstream_error", 503: "service_unavailable", 504: "request_timeout",
});
const IDENTITY = Object.freeze(["model", "provider", "connection", "route", "route_name"]);
const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/** @returns {ErrorInfo} */
export function errorInfo(type, message = "", code = null, status = null, retryAfter = null) {
  return { type, message, code, status, retryAfter };
}
const CANCELLED = () => errorInfo("cancelled", "the consumer closed the stream", "client_closed");
const now = () => performance.now() / 1000;

/** @param {ErrorInfo} error */
export function isRetryable(error) {
  if (NEVER_RETRIED.has(error.type) || (error.code != null && NEVER_RETRIED.has(error.code))) return false;
  return RETRYABLE_STATUSES.has(/** @type {number} */ (error.status)) || RETRYABLE_TYPES.has(error.type);
}

/** Full jitter before retry `retry` (1-based): uniform(0, min(maxDelay, baseDelay * 2^(retry-1))). */
export function backoff(retry, policy = DEFAULT_RETRY, random = Math.random) {
  const { baseDelay, maxDelay } = { ...DEFAULT_RETRY, ...policy };
  return random() * Math.min(maxDelay, baseDelay * 2 ** (retry - 1));
}

/**
 * Seconds to wait before attempt `attempt + 1`, or null: do not retry. A Retry-After
 * above maxRetryAfter ends the call; on another model only the backoff applies.
 * @param {RetryPolicy} policy @param {number} attempt @param {ErrorInfo} error
 */
export function retryDelay(policy, attempt, error, contentSeen, { sameModel = true, random = Math.random } = {}) {
  const p = { ...DEFAULT_RETRY, ...policy };
  if (contentSeen || attempt >= p.maxAttempts || !isRetryable(error)) return null;
  const wait = sameModel ? error.retryAfter : null;
  if (wait != null && wait > p.maxRetryAfter) return null;
  return Math.max(backoff(attempt, p, random), wait ?? 0);
}

/** Retry-After as seconds from `nowSeconds` (unix time): delta-seconds or an HTTP date. */
export function parseRetryAfter(value, nowSeconds = Date.now() / 1000) {
  if (!value || !value.trim()) return null;
  const text = value.trim();
  let seconds = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : NaN;
  if (Number.isNaN(seconds)) {
    const at = Date.parse(text);
    if (Number.isNaN(at)) return null;
    seconds = at / 1000 - nowSeconds;
  }
  return Math.max(0, seconds);
}

/** The `error` of an error event or an HTTP body, as ErrorInfo. */
export function wireError(error, defaultType = "server_error") {
  if (typeof error === "string") return errorInfo(defaultType, error);
  const code = error.code == null ? null : String(error.code);
  return errorInfo(typeof error.type === "string" && error.type ? error.type : defaultType,
    typeof error.message === "string" ? error.message : "", code);
}

/** A non-200 answer of any OpenAI-compatible server. */
export function errorFromResponse(status, body, retryAfter, nowSeconds = Date.now() / 1000) {
  const fallback = STATUS_TYPES[status] ?? "http_error";
  const text = body.slice(0, 500).trim() || `HTTP ${status}`;
  let error = null;
  try {
    const doc = JSON.parse(body);
    if (doc && typeof doc === "object" && (typeof doc.error === "string" || (doc.error && typeof doc.error === "object"))) error = doc.error;
  } catch { /* not JSON: the text is the message */ }
  const info = wireError(error || text, fallback);
  return errorInfo(info.type, info.message || text, info.code, status, parseRetryAfter(retryAfter, nowSeconds));
}

/**
 * The WHATWG event-stream rules on decoded text: LF, CRLF or CR line ends (a CRLF split
 * across reads is one end), `:` comments, multi-line data joined with LF, a blank line
 * dispatches an event that has data. feed() returns the data of each completed event.
 */
export class SSEParser {
  constructor(maxEventChars = MAX_EVENT_CHARS) {
    this.max = maxEventChars;
    this.line = "";
    this.data = /** @type {string[]} */ ([]);
    this.size = 0;
    this.crPending = false;
    this.idBuffer = null;
    /** The `id:` of the last event dispatched (a resumable stream's), or null. */
    this.lastEventId = null;
  }

  /** @param {string} text @returns {string[]} */
  feed(text) {
    const events = [];
    if (this.crPending && text.startsWith("\n")) text = text.slice(1);
    if (text.length) this.crPending = text.endsWith("\r");
    if (text.includes("\r")) text = text.replace(/\r\n?/g, "\n");
    let start = 0;
    let end = text.indexOf("\n");
    while (end >= 0) {
      const line = this.line + text.slice(start, end);
      this.line = "";
      this.#lineEvent(line, events);
      start = end + 1;
      end = text.indexOf("\n", start);
    }
    this.line += text.slice(start);
    if (this.line.length + this.size > this.max) throw new RangeError(`an event exceeded ${this.max} characters`);
    return events;
  }

  /** End of stream: an unterminated last line counts, an undispatched event does not. */
  flush() {
    const events = [];
    if (this.line) this.#lineEvent(this.line, events);
    this.line = "";
    this.data = [];
    this.size = 0;
    return events;
  }

  #lineEvent(line, events) {
    if (!line) {
      if (this.data.length) {
        events.push(this.data.join("\n"));
        this.lastEventId = this.idBuffer;
      }
      this.data = [];
      this.size = 0;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "id" && !value.includes("\0")) this.idBuffer = value;
    if (name !== "data") return; // event, retry: nothing a chat stream needs
    this.size += value.length + 1;
    if (this.size > this.max) throw new RangeError(`an event exceeded ${this.max} characters`);
    this.data.push(value);
  }
}

function usageOf(u) {
  const num = (v) => (typeof v === "number" ? v : 0);
  const prompt = num(u.prompt_tokens), completion = num(u.completion_tokens);
  return {
    promptTokens: prompt, completionTokens: completion,
    totalTokens: num(u.total_tokens) || prompt + completion,
    cachedTokens: num(u.prompt_tokens_details?.cached_tokens),
    reasoningTokens: num(u.completion_tokens_details?.reasoning_tokens),
    cost: typeof u.cost === "number" ? u.cost : null,
    priceSource: typeof u.price_source === "string" ? u.price_source : null,
  };
}

function buildCall(index, call) {
  const text = call.arguments.join("");
  try {
    return { index, id: call.id, name: call.name, arguments: text, validJson: true, parsed: JSON.parse(text) };
  } catch {
    return { index, id: call.id, name: call.name, arguments: text, validJson: false, parsed: null };
  }
}

const str = (v) => (typeof v === "string" ? v : null);
const sortedKeys = (map) => [...map.keys()].sort((a, b) => a - b);

/** One attempt's stream as a state machine: text in (with the time it arrived), events out, a result at the end. */
export class StreamAccumulator {
  constructor(callStarted, { attempt = 1, model = null } = {}) {
    this.parser = new SSEParser();
    this.callStarted = callStarted;
    this.attempt = attempt;
    this.requestedModel = model;
    this.choices = new Map();
    this.identity = {};
    this.requestId = null;
    this.usage = null;
    this.credits = null;
    this.error = null;
    this.done = false;
    this.lastEventAt = null;
    this.firstContentAt = null;
    this.lastContentAt = 0;
    this.contentEvents = 0;
    this.lastEventId = null; // the id of the last event read (a resumable stream's)
    this.wireEnded = false; // an error event ended the stream itself
    this.resumes = 0;
  }

  /** A resumable stream picked up again: a fresh connection's text from here (what the
   * cut one left half-read is dropped), the answer so far kept. */
  reconnect() {
    this.parser = new SSEParser(this.parser.max);
    this.resumes += 1;
  }

  get contentSeen() { return this.firstContentAt !== null; }
  get finished() { return this.done || this.error !== null; }
  open(requestId) { this.requestId = requestId || null; }
  fail(error) { if (this.error === null) this.error = error; }

  /** @param {string} text @param {number} at @returns {StreamEvent[]} */
  feed(text, at) {
    const out = [];
    let events;
    try {
      events = this.parser.feed(text);
    } catch (exc) {
      this.fail(errorInfo("invalid_response", String(exc.message), "event_too_large"));
      return out;
    }
    for (const data of events) this.#event(data, at, out);
    if (!this.finished && this.parser.lastEventId !== null) this.lastEventId = this.parser.lastEventId;
    return out;
  }

  /** @param {number} at @param {ErrorInfo|null} cause why the connection ended early @returns {StreamResult} */
  finish(at, cause = null) {
    for (const data of this.parser.flush()) this.#event(data, at, []);
    const choices = sortedKeys(this.choices).map((i) => this.#buildChoice(i));
    let error = this.error;
    let state;
    if (error !== null) state = "error";
    else if (this.done && choices.length && choices.every((c) => c.finishReason)) {
      state = choices.some((c) => c.finishReason === "length") ? "truncated" : "complete";
    } else {
      state = "incomplete";
      error = cause ?? errorInfo("connection_error", this.#missing(choices), "stream_ended");
    }
    const first = choices[0];
    const id = this.identity;
    return {
      state, ok: state === "complete" || state === "truncated",
      text: first?.text ?? "", reasoning: first?.reasoning ?? "", toolCalls: first?.toolCalls ?? [],
      finishReason: first?.finishReason ?? null, choices, usage: this.usage, creditsUsed: this.credits,
      error, requestId: this.requestId ?? id.id ?? null, requestedModel: this.requestedModel,
      model: id.model ?? null, provider: id.provider ?? null, connection: id.connection ?? null,
      route: id.route ?? null, routeName: id.route_name ?? null,
      ttft: this.firstContentAt === null ? null : this.firstContentAt - this.callStarted,
      tokensPerSecond: this.#rate(), duration: at - this.callStarted, attempts: this.attempt,
      resumes: this.resumes,
    };
  }

  #missing(choices) {
    if (this.done) return "[DONE] came before every choice had a finish_reason";
    if (choices.length && choices.every((c) => c.finishReason)) return "the stream ended after its finish_reason, before [DONE]";
    return "the stream ended before a finish_reason and [DONE]";
  }

  #rate() {
    const first = this.firstContentAt;
    if (first === null || this.lastContentAt <= first) return null;
    const tokens = this.usage?.completionTokens || this.contentEvents;
    return (tokens - 1) / (this.lastContentAt - first);
  }

  #buildChoice(index) {
    const c = this.choices.get(index);
    const toolCalls = sortedKeys(c.calls).map((i) => buildCall(i, c.calls.get(i)));
    return { index, text: c.text.join(""), reasoning: c.reasoning.join(""), toolCalls, finishReason: c.finishReason };
  }

  #event(data, at, out) {
    if (this.finished) return;
    this.lastEventAt = at;
    if (data === "[DONE]") { this.done = true; return; }
    let event;
    try {
      event = JSON.parse(data);
    } catch (exc) {
      this.error = errorInfo("invalid_response", `undecodable event: ${exc.message}`, "bad_event");
      return;
    }
    if (event === null || typeof event !== "object" || Array.isArray(event)) {
      this.error = errorInfo("invalid_response", "undecodable event: not an object", "bad_event");
      return;
    }
    if (typeof event.id === "string" && event.id && !("id" in this.identity)) this.identity.id = event.id;
    for (const name of IDENTITY) if (typeof event[name] === "string") this.identity[name] = event[name];
    if (event.usage && typeof event.usage === "object") {
      this.usage = usageOf(event.usage);
      out.push({ type: "usage", usage: this.usage });
    }
    if (typeof event.credits_used === "number") this.credits = event.credits_used;
    if (event.error != null) { this.error = wireError(event.error); this.wireEnded = true; return; }
    for (const choice of Array.isArray(event.choices) ? event.choices : []) {
      if (choice && typeof choice === "object") this.#choice(choice, at, out);
    }
  }

  #choice(choice, at, out) {
    const index = typeof choice.index === "number" ? choice.index : 0;
    let parts = this.choices.get(index);
    if (!parts) this.choices.set(index, (parts = { text: [], reasoning: [], calls: new Map(), finishReason: null }));
    const delta = choice.delta && typeof choice.delta === "object" ? choice.delta : null;
    if (delta) {
      const reasoning = str(delta.reasoning_content) || str(delta.reasoning);
      if (reasoning) {
        parts.reasoning.push(reasoning);
        out.push({ type: "reasoning", text: reasoning, choice: index });
        this.#content(at);
      }
      if (str(delta.content)) {
        parts.text.push(delta.content);
        out.push({ type: "content", text: delta.content, choice: index });
        this.#content(at);
      }
      for (const fragment of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
        if (!fragment || typeof fragment !== "object") continue;
        out.push(this.#toolCall(parts, fragment, index));
        this.#content(at);
      }
    }
    if (str(choice.finish_reason)) parts.finishReason = choice.finish_reason;
  }

  #toolCall(parts, fragment, choice) {
    const id = str(fragment.id);
    let index = fragment.index;
    if (typeof index !== "number") { // servers that omit index start a new call with each new id
      const known = sortedKeys(parts.calls);
      const last = known.length ? known[known.length - 1] : null;
      index = last === null ? 0 : id !== null && id !== parts.calls.get(last).id ? last + 1 : last;
    }
    let call = parts.calls.get(index);
    if (!call) parts.calls.set(index, (call = { id, name: "", arguments: [] }));
    else if (id && call.id === null) call.id = id;
    const fn = fragment.function && typeof fragment.function === "object" ? fragment.function : {};
    const name = str(fn.name), args = str(fn.arguments);
    if (name) call.name += name;
    if (args) call.arguments.push(args);
    return { type: "tool_call", index, arguments: args ?? "", id, name, choice };
  }

  #content(at) {
    if (this.firstContentAt === null) this.firstContentAt = at;
    this.lastContentAt = at;
    this.contentEvents += 1;
  }
}

function notAnEventStream(contentType) {
  if (contentType && contentType.split(";")[0].trim().toLowerCase() === "text/event-stream") return null;
  return errorInfo("invalid_response", `expected text/event-stream, got ${JSON.stringify(contentType)}`, "not_sse");
}

class CallbackError {
  constructor(error) { this.error = error; }
}

function sleep(seconds, signal) {
  return new Promise((resolve) => {
    const done = () => { clearTimeout(timer); signal?.removeEventListener("abort", done); resolve(); };
    const timer = setTimeout(done, seconds * 1000);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * One streamed chat completion, retries included; resolves to its StreamResult (it
 * rejects only when onEvent throws). `fields` are any other request fields; `stream` is
 * forced on and `stream_options.include_usage` defaults to on. Aborting `signal` closes
 * the connection at once: `incomplete` with an error of type `cancelled`. `resumable`
 * asks Sluice for a stream that survives a cut: after one it reconnects to its
 * `X-Sluice-Resume-Url` with `Last-Event-ID` (up to `retry.maxResumes`, counted in the
 * result's `resumes`), and an abort stops it with `DELETE`.
 * @param {{baseUrl: string, apiKey?: string|null, model: string, messages: any[], fields?: object,
 *   timeouts?: Timeouts, retry?: RetryPolicy, retryModel?: string|null, headers?: Record<string,string>,
 *   signal?: AbortSignal, onEvent?: (event: StreamEvent) => void, random?: () => number,
 *   fetch?: typeof fetch}} options
 * @returns {Promise<StreamResult>}
 */
export async function streamChat(options) {
  const { baseUrl, apiKey = null, model, messages, fields = {}, retryModel = null, signal, onEvent } = options;
  const resumable = options.resumable === true;
  const timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  const retry = { ...DEFAULT_RETRY, ...options.retry };
  const random = options.random ?? Math.random;
  const doFetch = options.fetch ?? globalThis.fetch;
  const url = baseUrl.replace(/\/+$/, "") + "/chat/completions";
  const modelFor = (attempt) => (attempt > 1 && retryModel ? retryModel : model);
  const started = now();
  let attempt = 0;
  let acc = new StreamAccumulator(started);
  for (;;) {
    if (signal?.aborted) return acc.finish(now(), CANCELLED());
    attempt += 1;
    const requestModel = modelFor(attempt);
    acc = new StreamAccumulator(started, { attempt, model: requestModel });
    const body = { model: requestModel, messages, stream_options: { include_usage: true }, ...fields };
    body.model = requestModel;
    body.stream = true;
    if (resumable) body.stream_options = { ...body.stream_options, resumable: true };
    const headers = { Accept: "text/event-stream" };
    if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
    Object.assign(headers, options.headers);
    const request = { url, method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) };
    const result = await attemptOnce(acc, request, { timeouts, started, signal, onEvent, doFetch, retry,
      resumeHeaders: headers, origin: new URL(url).origin, onOpen: options.onOpen });
    if (result.ok || result.error === null || result.error.type === "cancelled") return result;
    const sameModel = modelFor(attempt + 1) === modelFor(attempt);
    const delay = retryDelay(retry, attempt, result.error, acc.contentSeen, { sameModel, random });
    if (delay === null || (timeouts.total != null && result.duration + delay >= timeouts.total)) return result;
    await sleep(delay, signal);
  }
}

/** One attempt: the request, then for a resumable stream cut before its end each
 * reconnect with Last-Event-ID; an abort of a resumable stream sends its DELETE. */
async function attemptOnce(acc, request, context) {
  const { retry, resumeHeaders, origin, doFetch, signal } = context;
  let resumeUrl = null;
  for (;;) {
    const read = await readOnce(acc, request, context, resumeUrl === null);
    resumeUrl ??= read.resumeUrl;
    // Given up before its end (aborted, timed out, out of resumes): stop it, else the
    // gateway reads it on, charged, for a reconnect that will not come.
    const stop = () => {
      if (resumeUrl !== null && !acc.done && !acc.wireEnded) {
        doFetch(origin + resumeUrl, { method: "DELETE", headers: resumeHeaders, keepalive: true }).catch(() => {});
      }
    };
    if (read.result !== null) {
      stop();
      return read.result;
    }
    const more = resumeUrl !== null && acc.lastEventId !== null && !acc.finished && acc.resumes < retry.maxResumes;
    if (!more || signal?.aborted) {
      stop();
      return acc.finish(now(), read.broken);
    }
    acc.reconnect();
    request = { url: origin + resumeUrl, method: "GET", headers: { ...resumeHeaders, "Last-Event-ID": acc.lastEventId } };
  }
}

/** One connection's answer read into `acc`: `{result}` when the attempt is over (an
 * error answer, a cancel), else `{result: null, broken}` where the bytes stopped. */
async function readOnce(acc, request, { timeouts, started, signal, onEvent, doFetch, onOpen }, first) {
  const attemptStarted = now();
  const controller = new AbortController();
  let why = null; // "timeout" | "cancelled": what aborted the controller
  let timer = null;
  let armed = null; // the deadline the timer waits for: {at, code, limit}
  const deadline = () => { // first event (from sending), then idle; never after the total
    const last = acc.lastEventAt;
    const [limit, since, code] = last === null
      ? [timeouts.firstEvent, attemptStarted, "first_event_timeout"] : [timeouts.idle, last, "idle_timeout"];
    let soonest = limit != null ? { at: since + limit, code, limit } : null;
    const total = timeouts.total;
    if (total != null && (soonest === null || started + total <= soonest.at)) {
      soonest = { at: started + total, code: "deadline_exceeded", limit: total };
    }
    return soonest;
  };
  const arm = () => {
    clearTimeout(timer);
    armed = deadline();
    if (armed !== null) timer = setTimeout(() => { why ??= "timeout"; controller.abort(); }, Math.max(0, armed.at - now()) * 1000);
  };
  const cancel = () => { why ??= "cancelled"; controller.abort(); };
  signal?.addEventListener("abort", cancel, { once: true });
  let opened = false;
  let broken = null;
  let reader = null;
  let ended = false;
  let resumeUrl = null;
  try {
    arm();
    const response = await doFetch(request.url, {
      method: request.method, headers: request.headers, body: request.body, signal: controller.signal,
    });
    const requestId = response.headers.get("X-Request-Id");
    if (response.status !== 200) {
      if (first) acc.open(requestId);
      const text = await response.text();
      ended = true;
      acc.fail(errorFromResponse(response.status, text, response.headers.get("Retry-After")));
      return { result: acc.finish(now()), resumeUrl };
    }
    opened = true;
    if (first) {
      acc.open(requestId);
      const url = response.headers.get("X-Sluice-Resume-Url");
      if (url?.startsWith("/")) resumeUrl = url;
      onOpen?.({ requestId, resumeUrl });
    }
    const wrong = notAnEventStream(response.headers.get("Content-Type"));
    if (wrong) acc.fail(wrong);
    if (response.body === null) throw new TypeError("the response has no body");
    reader = response.body.getReader();
    const decoder = new TextDecoder("utf-8");
    while (!acc.finished) {
      const { done, value } = await reader.read();
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      const events = acc.feed(text, now());
      for (const event of events) {
        try { onEvent?.(event); } catch (exc) { throw new CallbackError(exc); }
      }
      if (done) { ended = true; break; }
      arm();
    }
  } catch (exc) {
    if (exc instanceof CallbackError) throw exc.error; // onEvent's own failure rejects streamChat
    if (why === "cancelled") return { result: acc.finish(now(), CANCELLED()), resumeUrl };
    if (why === "timeout") {
      const { code, limit } = /** @type {{code: string, limit: number}} */ (armed);
      acc.fail(errorInfo("request_timeout", `no event within ${limit} s`, code));
    } else { // fetch failed (refused, reset, DNS) or the body broke off
      const cause = exc.cause?.code ?? exc.cause?.message;
      const error = errorInfo("connection_error", cause ? `${exc.message}: ${cause}` : String(exc.message), "connection_failed");
      if (opened) broken = error;
      else acc.fail(error);
    }
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", cancel);
    if (!ended) { // close the connection: that stops the upstream call
      reader?.cancel().catch(() => {});
      controller.abort();
    }
  }
  return { result: null, broken, resumeUrl };
}

/**
 * A resumable stream picked up by its resume URL (`X-Sluice-Resume-Url`, given to
 * streamChat's `onOpen`), from its first event: after a page reload, say. Its events,
 * then the live tail, through `onEvent`; resolves to its StreamResult (resumed again
 * after a cut, stopped with DELETE when `signal` aborts). A stream past its retention
 * resolves to an error of code `stream_expired`.
 * @param {{baseUrl: string, apiKey?: string|null, resumeUrl: string, timeouts?: Timeouts,
 *   retry?: RetryPolicy, signal?: AbortSignal, onEvent?: (event: StreamEvent) => void,
 *   fetch?: typeof fetch}} options
 * @returns {Promise<StreamResult>}
 */
export async function resumeChat(options) {
  const { baseUrl, apiKey = null, resumeUrl, signal, onEvent } = options;
  const timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
  const retry = { ...DEFAULT_RETRY, ...options.retry };
  const doFetch = options.fetch ?? globalThis.fetch;
  const origin = new URL(baseUrl).origin;
  const headers = { Accept: "text/event-stream" };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const started = now();
  const acc = new StreamAccumulator(started);
  const request = { url: origin + resumeUrl, method: "GET", headers };
  const result = await attemptOnce(acc, request, { timeouts, started, signal, onEvent, doFetch, retry, resumeHeaders: headers, origin });
  return { ...result, requestId: resumeUrl.split("/").pop() || result.requestId }; // the stream's, not the GET's
}
