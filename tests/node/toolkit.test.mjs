// sluice/web/toolkit.js on Node's test runner, run by tests/client/test_js_toolkit.py,
// which starts a gateway serving the demo (SLUICE_BASE_URL, SLUICE_KEY) and the replay
// server (SLUICE_REPLAY_URL). Scripted failures come from a tiny HTTP server started here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import { after, before, describe, test } from "node:test";

import {
  SSEParser, StreamAccumulator, backoff, errorFromResponse, isRetryable, parseRetryAfter,
  retryDelay, streamChat,
} from "../../sluice/web/toolkit.js";

const CORPUS = new URL("../fixtures/sse/", import.meta.url);
const GATEWAY = process.env.SLUICE_BASE_URL;
const KEY = process.env.SLUICE_KEY;
const REPLAY = process.env.SLUICE_REPLAY_URL;
const TEXT = "Server-sent events are simple.";
const HI = [{ role: "user", content: "Hi" }];
const WEATHER = { type: "function", function: { name: "get_weather", parameters: {
  type: "object", properties: { city: { type: "string" } } } } };
const CLOCK = { type: "function", function: { name: "get_time" } };
const FAST = { baseDelay: 0.01, maxDelay: 0.02 };

/** Reads `text` as the toolkit does over the wire, in the given pieces. */
function readPieces(pieces) {
  const acc = new StreamAccumulator(0);
  const decoder = new TextDecoder();
  for (const piece of pieces) acc.feed(decoder.decode(piece, { stream: true }), 0);
  acc.feed(decoder.decode(), 0);
  return acc.finish(0);
}

describe("the pure parts", () => {
  test("SSE: LF, CRLF and CR line ends, comments and multi-line data, split anywhere", () => {
    const wire = ": hello\r\ndata: one\r\ndata: two\r\n\r\nevent: x\rdata:three\r\r: c\n\ndata\n\ndata: [DONE]\n\n";
    const expected = ["one\ntwo", "three", "", "[DONE]"];
    assert.deepEqual(new SSEParser().feed(wire), expected);
    for (let at = 1; at < wire.length; at++) {
      const parser = new SSEParser();
      const got = [...parser.feed(wire.slice(0, at)), ...parser.feed(wire.slice(at)), ...parser.flush()];
      assert.deepEqual(got, expected, `split at ${at}`);
    }
    const parser = new SSEParser();
    assert.deepEqual([...wire].flatMap((c) => parser.feed(c)), expected);
    assert.deepEqual(new SSEParser().feed("data: cut"), []); // no blank line: not dispatched
  });

  test("every recording split at every byte and read byte by byte equals the whole", () => {
    for (const name of ["text.sse", "tool_call.sse", "parallel_tool_calls.sse", "reasoning.sse", "sluice_usage.sse"]) {
      const data = readFileSync(new URL(name, CORPUS));
      const whole = readPieces([data]);
      assert.equal(whole.state, "complete", name);
      for (let at = 1; at < data.length; at++) {
        assert.deepEqual(readPieces([data.subarray(0, at), data.subarray(at)]), whole, `${name} at ${at}`);
      }
      assert.deepEqual(readPieces([...data].map((b) => Uint8Array.of(b))), whole, name);
    }
  });

  test("a UTF-8 character split across reads is decoded whole", () => {
    const bytes = new TextEncoder().encode('data: {"choices":[{"delta":{"content":"héllo ✓"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n');
    const result = readPieces([...bytes].map((b) => Uint8Array.of(b)));
    assert.equal(result.state, "complete");
    assert.equal(result.text, "héllo ✓");
  });

  test("the recordings reassemble as the Python toolkit does", () => {
    const read = (name) => readPieces([readFileSync(new URL(name, CORPUS))]);
    const tool = read("tool_call.sse");
    assert.equal(tool.finishReason, "tool_calls");
    assert.deepEqual(tool.toolCalls.map((c) => [c.index, c.id, c.name, c.validJson, c.parsed]),
      [[0, "call_bXk2mQ", "get_weather", true, { city: "Berlin", unit: "celsius" }]]);
    assert.equal(tool.usage.completionTokens, 19);
    const parallel = read("parallel_tool_calls.sse");
    assert.deepEqual(parallel.toolCalls.map((c) => [c.id, c.name, c.parsed]),
      [["call_one", "get_weather", { city: "Paris" }], ["call_two", "get_time", { tz: "CET" }]]);
    const reasoning = read("reasoning.sse");
    assert.deepEqual([reasoning.reasoning, reasoning.text, reasoning.usage.reasoningTokens], ["The user asks 2+2.", "2+2 = 4.", 25]);
    const sluice = read("sluice_usage.sse");
    assert.deepEqual([sluice.text, sluice.model, sluice.provider, sluice.requestId, sluice.usage.priceSource],
      ["Hello from Sluice", "sluice/demo", "demo", "req_000003", "list"]);
    assert.ok(sluice.usage.cost > 0);
  });

  test("arguments that are not JSON are kept as text; a bad event is an error", () => {
    const bad = readPieces([Buffer.from('data: {"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{nope"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n')]);
    assert.deepEqual([bad.state, bad.toolCalls[0].validJson, bad.toolCalls[0].arguments], ["complete", false, "{nope"]);
    const broken = readPieces([Buffer.from("data: {oops\n\n")]);
    assert.deepEqual([broken.state, broken.error.type, broken.error.code], ["error", "invalid_response", "bad_event"]);
  });

  test("what is retried, the backoff and Retry-After", () => {
    const e = (type, status = null, code = null) => ({ type, message: "", code, status, retryAfter: null });
    for (const error of [e("x", 429), e("x", 503), e("x", 408), e("x", 502), e("x", 504), e("rate_limit_error"),
      e("upstream_error"), e("service_unavailable"), e("request_timeout"), e("connection_error")]) {
      assert.ok(isRetryable(error), JSON.stringify(error));
    }
    for (const error of [e("x", 400), e("invalid_request_error", 429), e("authentication_error", 401),
      e("budget_exceeded", 402), e("guardrail_error", 503, "guardrail_unavailable"), e("invalid_response"), e("cancelled")]) {
      assert.ok(!isRetryable(error), JSON.stringify(error));
    }
    const policy = { maxAttempts: 3, baseDelay: 0.5, maxDelay: 8, maxRetryAfter: 60 };
    assert.deepEqual([1, 2, 3, 6, 10].map((k) => backoff(k, policy, () => 1)), [0.5, 1, 2, 8, 8]);
    assert.equal(backoff(3, policy, () => 0), 0);
    assert.equal(retryDelay(policy, 1, { ...e("x", 503), retryAfter: 5 }, false, { random: () => 0 }), 5);
    assert.equal(retryDelay(policy, 1, { ...e("x", 503), retryAfter: 5 }, false, { random: () => 0, sameModel: false }), 0);
    assert.equal(retryDelay(policy, 1, { ...e("x", 503), retryAfter: 61 }, false), null);
    assert.equal(retryDelay(policy, 1, e("x", 503), true), null); // content was seen
    assert.equal(retryDelay(policy, 3, e("x", 503), false), null); // the last attempt
    assert.equal(parseRetryAfter("2.5", 0), 2.5);
    assert.equal(parseRetryAfter("-3", 0), 0);
    assert.equal(parseRetryAfter("Wed, 21 Oct 2015 07:28:10 GMT", Date.UTC(2015, 9, 21, 7, 28, 0) / 1000), 10);
    assert.equal(parseRetryAfter("soon", 0), null);
    assert.equal(parseRetryAfter(null, 0), null);
    const limited = errorFromResponse(429, '{"error":{"message":"slow","type":"rate_limit_error","code":42}}', "7", 0);
    assert.deepEqual(limited, { type: "rate_limit_error", message: "slow", code: "42", status: 429, retryAfter: 7 });
    assert.deepEqual(errorFromResponse(503, "<html>down</html>", null, 0),
      { type: "service_unavailable", message: "<html>down</html>", code: null, status: 503, retryAfter: null });
  });
});

describe("against the gateway (the demo)", { skip: !GATEWAY && "SLUICE_BASE_URL is not set" }, () => {
  const chat = (options) => streamChat({ baseUrl: `${GATEWAY}/v1`, apiKey: KEY, model: "sluice/demo", messages: HI, ...options });

  test("a complete answer with usage, identity, TTFT and tokens/s", async () => {
    const events = [];
    const result = await chat({ onEvent: (event) => events.push(event) });
    assert.equal(result.state, "complete");
    assert.ok(result.ok);
    assert.equal(result.finishReason, "stop");
    assert.ok(result.text.startsWith("Hello from Sluice"));
    assert.equal(events.filter((e) => e.type === "content").map((e) => e.text).join(""), result.text);
    assert.ok(events.some((e) => e.type === "usage"));
    assert.ok(result.usage.completionTokens > 1 && result.usage.cost > 0);
    assert.ok(result.requestId.startsWith("req_"));
    assert.deepEqual([result.model, result.provider, result.attempts], ["sluice/demo", "demo", 1]);
    assert.ok(result.ttft > 0 && result.tokensPerSecond > 0 && result.duration >= result.ttft);
  });

  test("max_tokens: truncated, still ok", async () => {
    const result = await chat({ fields: { max_tokens: 3 } });
    assert.deepEqual([result.state, result.ok, result.finishReason], ["truncated", true, "length"]);
    assert.ok(result.text.length > 0);
  });

  test("tool calls reassembled from their fragments and parsed", async () => {
    const fragments = [];
    const result = await chat({ fields: { tools: [WEATHER, CLOCK] }, onEvent: (e) => e.type === "tool_call" && fragments.push(e) });
    assert.deepEqual([result.state, result.finishReason], ["complete", "tool_calls"]);
    assert.deepEqual(new Set(fragments.map((f) => f.index)), new Set([0, 1]));
    assert.deepEqual(result.toolCalls.map((c) => [c.name, c.validJson, c.parsed]),
      [["get_weather", true, { city: "demo" }], ["get_time", true, {}]]);
    assert.ok(result.toolCalls.every((c) => c.id.startsWith("call_")));
  });

  test("a wrong key is an error that is not retried", async () => {
    const result = await chat({ apiKey: "sk-wrong", retry: FAST });
    assert.deepEqual([result.state, result.error.type, result.error.status, result.attempts],
      ["error", "authentication_error", 401, 1]);
  });

  test("a first-event timeout below the first token fails every attempt, the retry on the retry model", async () => {
    const result = await chat({ timeouts: { firstEvent: 0.001 }, retry: { maxAttempts: 2, ...FAST }, retryModel: "sluice/demo-fast" });
    assert.deepEqual([result.state, result.error.code, result.attempts, result.requestedModel],
      ["error", "first_event_timeout", 2, "sluice/demo-fast"]);
  });

  test("cancel with an AbortController: incomplete, cancelled, the partial answer kept", async () => {
    const controller = new AbortController();
    let seen = "";
    const result = await chat({ signal: controller.signal, onEvent: (e) => {
      if (e.type === "content") { seen += e.text; controller.abort(); }
    } });
    assert.deepEqual([result.state, result.error.type, result.error.code], ["incomplete", "cancelled", "client_closed"]);
    assert.ok(seen.length > 0 && result.text === seen);
  });
});

describe("against the replay server's faults", { skip: !REPLAY && "SLUICE_REPLAY_URL is not set" }, () => {
  const replay = (fault, file = "text.sse", timeouts = { firstEvent: 5, idle: 0.3 }) => streamChat({
    baseUrl: REPLAY, apiKey: "k", model: "m", messages: HI, timeouts, retry: { maxAttempts: 1 },
    headers: { "X-Replay-File": file, "X-Replay-Fault": fault },
  });
  const cases = [
    ["", "complete", null], ["split", "complete", null], ["comment", "complete", null],
    ["crlf", "complete", null], ["trickle", "complete", null],
    ["no-done", "incomplete", "stream_ended"], ["length", "truncated", null],
    ["error", "error", "replay_fault"], ["stall", "error", "idle_timeout"],
    ["reset", "incomplete", "connection_failed"],
  ];
  for (const [fault, state, code] of cases) {
    test(`${fault || "no fault"} → ${state}`, async () => {
      const result = await replay(fault);
      assert.equal(result.state, state, JSON.stringify(result.error));
      if (code !== null) assert.equal(result.error.code, code);
      if (result.ok) assert.equal(result.text, TEXT);
      else assert.ok(TEXT.startsWith(result.text), result.text); // the partial answer kept
      if (["no-done", "error", "reset"].includes(fault)) assert.ok(result.text.length > 0);
      if (fault === "trickle") assert.ok(result.ttft > 0 && result.tokensPerSecond > 0);
    });
  }

  test("tool calls survive a split on the wire", async () => {
    const result = await replay("split", "tool_call.sse");
    assert.equal(result.state, "complete");
    assert.deepEqual(result.toolCalls[0].parsed, { city: "Berlin", unit: "celsius" });
    const parallel = await replay("split", "parallel_tool_calls.sse");
    assert.deepEqual(parallel.toolCalls.map((c) => c.name), ["get_weather", "get_time"]);
  });

  test("an unknown fault is refused with a 400, not retried", async () => {
    const result = await replay("hiccup");
    assert.deepEqual([result.state, result.error.status, result.attempts], ["error", 400, 1]);
  });

  // A plain fetch reader, no toolkit: what it sees of each fault is what the fault
  // implies, if it looks (a [DONE], a finish_reason, an error event, its own timeout).
  const plain = async (fault, ms = 1000) => {
    const seen = { text: "", finish: null, done: false, error: null, failed: null };
    try {
      const answer = await fetch(`${REPLAY}/chat/completions`, {
        method: "POST", body: "{}", signal: AbortSignal.timeout(ms),
        headers: { "X-Replay-File": "text.sse", "X-Replay-Fault": fault },
      });
      const body = await answer.text();
      for (const event of body.replaceAll("\r\n", "\n").split("\n\n")) {
        const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (!data) continue;
        if (data === "[DONE]") { seen.done = true; continue; }
        const doc = JSON.parse(data);
        if (doc.error) { seen.error = doc.error.code; continue; }
        for (const choice of doc.choices ?? []) {
          seen.text += choice.delta?.content ?? "";
          seen.finish = choice.finish_reason ?? seen.finish;
        }
      }
    } catch (err) {
      seen.failed = err.name;
    }
    return seen;
  };

  test("a plain fetch reader sees each fault for what it is", async () => {
    assert.deepEqual(await plain("split"), { text: TEXT, finish: "stop", done: true, error: null, failed: null });
    assert.deepEqual(await plain("no-done"), { text: TEXT, finish: "stop", done: false, error: null, failed: null });
    assert.equal((await plain("length")).finish, "length");
    assert.equal((await plain("error")).error, "replay_fault");
    assert.equal((await plain("stall", 300)).failed, "TimeoutError");
    assert.ok((await plain("reset")).failed !== null);
  });
});

describe("scripted failures and retries", () => {
  const seen = new Map(); // script → the requests it got
  const closed = new Map(); // script → whether its client closed the connection early
  let server, base;
  const sse = (res) => res.writeHead(200, { "Content-Type": "text/event-stream" });
  const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: "c1", model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const answer = (res) => {
    sse(res);
    res.end(chunk({ role: "assistant" }) + chunk({ content: "fine" }) + chunk({}, "stop") + "data: [DONE]\n\n");
  };
  const fail = (res, status, headers = {}, type = "service_unavailable") => {
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify({ error: { type, message: "scripted" } }));
  };
  const SCRIPTS = {
    "503-then-ok": (res, n) => (n === 1 ? fail(res, 503, { "Retry-After": "0" }) : answer(res)),
    "always-503": (res) => fail(res, 503),
    "retry-after-too-long": (res) => fail(res, 429, { "Retry-After": "3600" }, "rate_limit_error"),
    "bad-request": (res) => fail(res, 400, {}, "invalid_request_error"),
    "not-sse": (res) => { res.writeHead(200, { "Content-Type": "application/json" }); res.end("{}"); },
    "content-then-cut": (res) => { sse(res); res.write(chunk({ content: "Hel" })); setTimeout(() => res.socket.destroy(), 20); },
    "hang": () => {},
    "keep-alive-only": (res) => { sse(res); const t = setInterval(() => res.write(": ping\n\n"), 20); res.on("close", () => clearInterval(t)); },
    "slow": (res) => {
      sse(res);
      const t = setInterval(() => res.write(chunk({ content: "tick " })), 20);
      res.on("close", () => clearInterval(t));
    },
  };
  SCRIPTS["slow-cancel"] = SCRIPTS.slow;

  before(async () => {
    server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const script = req.headers["x-script"];
        const list = seen.get(script) ?? [];
        list.push({ body: JSON.parse(body), headers: req.headers });
        seen.set(script, list);
        res.on("close", () => closed.set(script, !res.writableFinished));
        SCRIPTS[script](res, list.length);
      });
    });
    await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${server.address().port}/v1`;
  });
  after(() => { server.closeAllConnections(); server.close(); });

  const run = (script, options = {}) => streamChat({
    baseUrl: base, apiKey: "sk-test", model: "big/model", messages: HI, retry: FAST,
    headers: { "X-Script": script }, ...options,
  });

  test("a 503 before any content is retried on the retry model, then succeeds", async () => {
    const result = await run("503-then-ok", { retryModel: "small/fast", fields: { temperature: 0 } });
    assert.deepEqual([result.state, result.text, result.attempts, result.requestedModel], ["complete", "fine", 2, "small/fast"]);
    const [first, second] = seen.get("503-then-ok");
    assert.deepEqual([first.body.model, second.body.model], ["big/model", "small/fast"]);
    assert.deepEqual([first.body.stream, first.body.stream_options, first.body.temperature], [true, { include_usage: true }, 0]);
    assert.equal(first.headers.authorization, "Bearer sk-test");
  });

  test("retries stop at maxAttempts with the last error", async () => {
    const result = await run("always-503", { retry: { maxAttempts: 3, ...FAST } });
    assert.deepEqual([result.state, result.error.status, result.attempts, seen.get("always-503").length], ["error", 503, 3, 3]);
  });

  test("a Retry-After above maxRetryAfter ends the call", async () => {
    const result = await run("retry-after-too-long");
    assert.deepEqual([result.state, result.error.type, result.error.retryAfter, result.attempts], ["error", "rate_limit_error", 3600, 1]);
  });

  test("never retried: a 400, a 200 that is not an event stream", async () => {
    const bad = await run("bad-request");
    assert.deepEqual([bad.error.type, bad.attempts], ["invalid_request_error", 1]);
    const json = await run("not-sse");
    assert.deepEqual([json.state, json.error.code, json.attempts], ["error", "not_sse", 1]);
  });

  test("no retry after content: a cut is incomplete with the partial text", async () => {
    const result = await run("content-then-cut");
    assert.deepEqual([result.state, result.text, result.error.type, result.attempts], ["incomplete", "Hel", "connection_error", 1]);
    assert.equal(seen.get("content-then-cut").length, 1);
  });

  test("a refused connection is retried, then an error", async () => {
    const other = http.createServer();
    await new Promise((resolve) => other.listen(0, "127.0.0.1", resolve));
    const port = other.address().port;
    await new Promise((resolve) => other.close(resolve));
    const result = await streamChat({ baseUrl: `http://127.0.0.1:${port}/v1`, model: "m", messages: HI, retry: { maxAttempts: 2, ...FAST } });
    assert.deepEqual([result.state, result.error.type, result.error.code, result.attempts], ["error", "connection_error", "connection_failed", 2]);
  });

  test("a first-event timeout; keep-alive comments do not reset it", async () => {
    const hung = await run("hang", { timeouts: { firstEvent: 0.1 }, retry: { maxAttempts: 1 } });
    assert.deepEqual([hung.state, hung.error.type, hung.error.code], ["error", "request_timeout", "first_event_timeout"]);
    const pinged = await run("keep-alive-only", { timeouts: { firstEvent: 0.15 }, retry: { maxAttempts: 1 } });
    assert.deepEqual([pinged.state, pinged.error.code], ["error", "first_event_timeout"]);
    const total = await run("slow", { timeouts: { total: 0.15 }, retry: { maxAttempts: 1 } });
    assert.deepEqual([total.state, total.error.code], ["error", "deadline_exceeded"]);
    assert.ok(total.text.startsWith("tick"));
  });

  test("cancel closes the connection: incomplete, cancelled, nothing retried", async () => {
    const controller = new AbortController();
    let events = 0;
    const result = await run("slow-cancel", { signal: controller.signal, onEvent: () => ++events === 3 && controller.abort() });
    assert.deepEqual([result.state, result.error.type, result.text, result.attempts], ["incomplete", "cancelled", "tick tick tick ", 1]);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(closed.get("slow-cancel"), true);
    const early = new AbortController();
    early.abort();
    const never = await run("hang", { signal: early.signal });
    assert.deepEqual([never.state, never.error.type], ["incomplete", "cancelled"]);
  });

  test("an exception in onEvent rejects the call and closes the stream", async () => {
    await assert.rejects(run("slow", { onEvent: () => { throw new Error("consumer bug"); } }), /consumer bug/);
  });
});
