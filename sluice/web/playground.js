// The playground: a model from /v1/models, a system prompt, temperature and max tokens,
// several turns, the answer streamed through fetch + ReadableStream by the consumer
// toolkit (reasoning and tool-call fragments shown as they assemble), Stop aborting the
// fetch, the end state with its numbers, the request id opening its record, and the
// request copied as curl, Python or JS. The operator chats on behalf of an account
// (account.js gives the key it uses). Its streams are resumable: a cut connection is
// picked up by the toolkit, and an answer still streaming survives a page reload (its
// resume URL kept in the tab's session storage, the answer replayed from its start).
import { resumeChat, streamChat } from "./toolkit.js";
import { el, orDash, usd } from "./api.js";
import { curl, javascript, python } from "./snippets.js";

const $ = (id) => document.getElementById(id);

const WEATHER_TOOL = Object.freeze({
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city now.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
});

const OUTCOMES = Object.freeze({
  complete: "Complete.",
  truncated: "Truncated: the answer reached its token limit (finish_reason length).",
  incomplete: "Incomplete: the stream ended before its finish_reason and [DONE].",
  error: "Error event: the gateway ended the stream with an error.",
});
const SNIPPETS = Object.freeze({ curl, python, js: javascript });
const LIVE = "sluice.console.live";

export class Playground {
  /** `keys` gives the API to chat with (the operator's changes with the account);
   * `onFinished` runs after each answer, `openRecord(id, api)` shows a request's record. */
  constructor(keys, { onFinished, openRecord }) {
    this.keys = keys;
    this.api = null;
    this.onFinished = onFinished;
    this.openRecord = openRecord;
    this.abort = null;
    this.tools = new Map();
    this.turns = [];
  }

  start() {
    $("chat-form").addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    $("stop").addEventListener("click", () => this.abort?.abort());
    $("new-chat").addEventListener("click", () => this.newConversation());
    $("stat-request").addEventListener("click", (event) => {
      event.preventDefault();
      const id = $("stat-request").dataset.id;
      if (id) this.openRecord(id, this.api);
    });
    for (const button of document.querySelectorAll("[data-copy]")) {
      button.addEventListener("click", () => this.copy(button.dataset.copy));
    }
  }

  /** The key is settled when the page is first shown (the operator's is made then). */
  async shown() {
    if (this.keys.started) return;
    this.keys.started = true;
    await this.keys.start((api) => this.use(api));
  }

  stop() {
    this.abort?.abort();
    sessionStorage.removeItem(LIVE);
    this.keys.stop();
  }

  /** Chat with another key from now on (a new account for the operator). */
  async use(api) {
    this.api = api;
    this.newConversation();
    const models = await api.json("/v1/models");
    const chat = models.data.filter((model) => model.capabilities?.chat !== false);
    $("model").replaceChildren(...chat.map((model) => el("option", model.id, { value: model.id })));
    await this.pickUp();
  }

  /** An answer that was streaming when the page went away (a reload): replayed from
   * its start, then its live tail, through its resume URL. */
  async pickUp() {
    const live = liveStream();
    if (live === null || live.key !== this.api.key.slice(-12)) return;
    this.turns = live.turns;
    this.transcript();
    this.reset();
    $("model").value = live.model;
    $("outcome").textContent = "Picking up the answer that was streaming before the reload…";
    await this.run(live.prompt, (signal, onEvent) => resumeChat({
      baseUrl: `${location.origin}/v1`, apiKey: this.api.key, resumeUrl: live.resumeUrl, signal, onEvent,
    }), live.requestId);
  }

  newConversation() {
    this.turns = [];
    this.transcript();
  }

  transcript() {
    const list = $("transcript");
    list.hidden = this.turns.length === 0;
    list.replaceChildren(...this.turns.map((turn) => el("li", turn.content, { class: `turn ${turn.role}` })));
  }

  /** What the next Send posts (without `stream`, which the toolkit sets). */
  request() {
    const messages = [];
    const system = $("system").value.trim();
    if (system) messages.push({ role: "system", content: system });
    messages.push(...this.turns, { role: "user", content: $("prompt").value });
    const fields = {};
    const maxTokens = Number($("max-tokens").value);
    if (Number.isInteger(maxTokens) && maxTokens > 0) fields.max_tokens = maxTokens;
    const temperature = $("temperature").value.trim();
    if (temperature !== "" && Number.isFinite(Number(temperature))) fields.temperature = Number(temperature);
    if ($("offer-tool").checked) fields.tools = [WEATHER_TOOL];
    return { model: $("model").value, messages, fields };
  }

  copy(kind) {
    const { model, messages, fields } = this.request();
    const code = SNIPPETS[kind](`${location.origin}/v1`, { model, messages, stream: true, ...fields });
    $("snippet").hidden = false;
    $("snippet").textContent = code;
    $("snippet").dataset.kind = kind;
    navigator.clipboard?.writeText(code).catch(() => {});  // shown either way
  }

  reset() {
    $("answer").textContent = "";
    $("reasoning").textContent = "";
    $("reasoning").hidden = true;
    $("tool-calls").textContent = "";
    $("tool-calls").hidden = true;
    $("outcome").textContent = "";
    $("outcome").className = "outcome";
    for (const id of ["stat-ttft", "stat-rate", "stat-tokens", "stat-cost", "stat-request"]) $(id).textContent = "–";
    delete $("stat-request").dataset.id;
    $("stat-state").textContent = "streaming";
    this.tools.clear();
  }

  async send() {
    this.reset();
    const { model, messages, fields } = this.request();
    const turns = [...this.turns];
    await this.run(messages.at(-1), (signal, onEvent) => streamChat({
      baseUrl: `${location.origin}/v1`, apiKey: this.api.key, model, messages, fields, signal, onEvent,
      resumable: true,
      onOpen: ({ requestId, resumeUrl }) => {
        if (resumeUrl) keepLive({ resumeUrl, requestId, model, turns, prompt: messages.at(-1), key: this.api.key.slice(-12) });
      },
    }));
  }

  /** One answer streamed by `stream(signal, onEvent)`: shown as it comes, its end
   * state and numbers, and a complete one added to the conversation. */
  async run(prompt, stream, requestId = null) {
    this.abort = new AbortController();
    $("send").disabled = true;
    $("stop").disabled = false;
    try {
      const result = await stream(this.abort.signal, (event) => this.onEvent(event));
      this.finish(requestId ? { ...result, requestId } : result);
      if ((result.state === "complete" || result.state === "truncated") && result.text) {
        this.turns.push(prompt, { role: "assistant", content: result.text });
        this.transcript();
        $("prompt").value = "";
      }
    } finally {
      sessionStorage.removeItem(LIVE);
      $("send").disabled = false;
      $("stop").disabled = true;
      this.abort = null;
      this.onFinished();
    }
  }

  onEvent(event) {
    if (event.type === "content") $("answer").append(event.text);
    else if (event.type === "reasoning") {
      $("reasoning").hidden = false;
      $("reasoning").append(event.text);
    } else if (event.type === "tool_call") this.toolFragment(event);
  }

  toolFragment(event) {
    const call = this.tools.get(event.index) ?? { name: "", arguments: "" };
    if (event.name) call.name = event.name;
    call.arguments += event.arguments;
    this.tools.set(event.index, call);
    $("tool-calls").hidden = false;
    $("tool-calls").textContent = [...this.tools.values()].map((c) => `${c.name}(${c.arguments})`).join("\n");
  }

  finish(result) {
    const error = result.error;
    const stopped = error?.type === "cancelled";
    const refused = !stopped && error && error.status !== null && error.status !== 200;
    $("stat-state").textContent = stopped ? "cancelled" : result.state;
    const outcome = $("outcome");
    outcome.className = `outcome ${stopped ? "state-stopped" : `state-${result.state}`}`;
    if (stopped) outcome.textContent = "Stopped: you cancelled it; only what was produced is charged.";
    else if (refused) outcome.textContent = `Refused before any answer (HTTP ${error.status}, ${error.code ?? error.type}): ${error.message}`;
    else outcome.textContent = OUTCOMES[result.state] + (error ? ` ${error.type}: ${error.message}` : "");
    $("stat-ttft").textContent = result.ttft === null ? "–" : `${Math.round(result.ttft * 1000)} ms`;
    $("stat-rate").textContent = result.tokensPerSecond === null ? "–" : result.tokensPerSecond.toFixed(1);
    const usage = result.usage;
    $("stat-tokens").textContent = usage ? `${usage.promptTokens} in, ${usage.completionTokens} out` : "–";
    $("stat-cost").textContent = usage && usage.cost !== null ? usd(usage.cost) : "–";
    $("stat-request").textContent = orDash(result.requestId);
    if (result.requestId) $("stat-request").dataset.id = result.requestId;
    if (stopped && !usage && result.requestId) this.numbersFromLog(result.requestId);
  }

  /** A stopped stream never gets its usage chunk: its tokens and cost come from the
   * request log once the row is written (the listing answers 200 while it is not). */
  async numbersFromLog(id) {
    for (let tries = 0; tries < 30; tries++) {
      const page = await this.api.json("/v1/requests?limit=20").catch(() => null);
      const found = page?.data.find((record) => record.id === id);
      if (found) {
        $("stat-tokens").textContent = `${found.prompt_tokens} in, ${found.completion_tokens} out`;
        $("stat-cost").textContent = usd(found.cost);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/** The stream this tab was reading, if the page went away while it streamed. */
function liveStream() {
  try {
    const live = JSON.parse(sessionStorage.getItem(LIVE) || "null");
    return live && typeof live.resumeUrl === "string" && live.resumeUrl.startsWith("/v1/streams/") ? live : null;
  } catch {
    return null;
  }
}

function keepLive(live) {
  sessionStorage.setItem(LIVE, JSON.stringify(live));
}
