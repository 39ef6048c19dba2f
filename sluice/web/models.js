// Models (admin key): every served model and route with the targets a request tries in
// order and each target's circuit; the connections with their breaker, error rate and
// time to first token, and which models' circuits are open and for how long; the
// response cache (cache.js); and a button that reloads the config file.
import { el, ms, row } from "./api.js";
import { showCache } from "./cache.js";
import { jsonPost, say } from "./forms.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 5000;

export class Models {
  constructor(api) {
    this.api = api;
    this.timer = null;
  }

  start() {
    $("reload").addEventListener("click", () => this.reload());
  }

  shown() {
    this.refresh();
    clearInterval(this.timer);
    this.timer = setInterval(() => this.figures(), REFRESH_MS);
  }

  hidden() {
    clearInterval(this.timer);
  }

  stop() {
    clearInterval(this.timer);
  }

  async refresh() {
    await Promise.all([this.models(), this.figures()]);
  }

  /** What changes with traffic: the connections and the cache. */
  async figures() {
    await Promise.all([this.connections(), showCache(this.api)]);
  }

  async models() {
    const answer = await this.api.json("/admin/models");
    $("model-table").tBodies[0].replaceChildren(...answer.data.map((model) => row([
      model.id, model.kind, price(model.pricing), model.max_output_tokens ?? "–", targets(model.targets),
    ], { "data-id": model.id })));
  }

  async connections() {
    const answer = await this.api.json("/admin/connections");
    $("connections").tBodies[0].replaceChildren(...answer.data.map((c) => {
      const circuits = c.circuits.map((circuit) => circuit.state === "open"
        ? `${circuit.model}: open, probed in ${Math.ceil(circuit.reopens_in_s)} s`
        : `${circuit.model}: half-open, next request probes`);
      const tr = row([
        c.id, c.provider, c.breaker, String(c.requests),
        c.error_rate === null ? "–" : `${(c.error_rate * 100).toFixed(1)} %`, ms(c.mean_ttft_ms),
        circuits.length ? circuits.join("; ") : "none",
      ], { "data-id": c.id });
      tr.cells[2].classList.add(`breaker-${c.breaker}`);
      return tr;
    }));
  }

  async reload() {
    const button = $("reload");
    button.disabled = true;
    try {
      const done = await this.api.json("/admin/reload", jsonPost({}));
      const changed = done.changed.length ? `changed: ${done.changed.join(", ")}` : "nothing changed";
      const restart = done.needs_restart.length ? `; needs a restart: ${done.needs_restart.join(", ")}` : "";
      say($("reload-result"), `Reloaded (${changed}${restart}).`);
      await this.refresh();
    } catch (error) {
      say($("reload-result"), `Not reloaded, the running config stays: ${error.message}`, false);
    } finally {
      button.disabled = false;
    }
  }
}

function price(pricing) {
  return pricing ? `$${pricing.input} / $${pricing.output}` : "unpriced";
}

/** The targets in order: `primary conn_a (model-a)`, a fallback marked, an open circuit flagged, a fastest model's estimates. */
function targets(list) {
  const items = list.map((t) => el(
    "li", `${t.position} ${t.connection} → ${t.native}${t.fallback ? " (fallback)" : ""}${t.breaker === "closed" ? "" : ` [${t.breaker}]`}${t.ttft_estimate_ms == null ? "" : `, ~${Math.round(t.ttft_estimate_ms)} ms to first token`}${t.tokens_per_second_estimate == null ? "" : `, ~${Math.round(t.tokens_per_second_estimate)} tokens/s`}`,
    { class: `breaker-${t.breaker}` },
  ));
  return el("ol", null, { class: "targets" }, ...items);
}
