// The response cache on the Models page (admin key, GET /admin/cache): the store's
// entries and bytes of its bound, evictions, the hit ratio with its counts, the
// identical requests sharing an upstream call now, and each cached model's settings.
import { row } from "./api.js";

const $ = (id) => document.getElementById(id);
const UNITS = ["B", "KiB", "MiB", "GiB"];

/** Fills the panel from one read of /admin/cache. */
export async function showCache(api) {
  const cache = await api.json("/admin/cache");
  const { store, requests } = cache;
  const where = { redis: "(shared through Redis)", sqlite: "(shared by this machine's workers)" };
  $("cache-kind").textContent = where[store.kind] || "(this process's memory)";
  $("cache-entries").textContent = String(store.entries);
  $("cache-bytes").textContent = `${size(store.bytes)} of ${size(store.max_bytes)} (one answer at most ${size(store.max_entry_bytes)})`;
  $("cache-evictions").textContent = String(store.evictions);
  const ratio = cache.hit_ratio === null ? "–" : `${(cache.hit_ratio * 100).toFixed(1)} %`;
  $("cache-ratio").textContent = `${ratio} (${requests.hit} hit, ${requests.miss} miss, ${requests.bypass} bypass)`;
  $("cache-flights").textContent = `${cache.flights} streaming, ${cache.flight_joiners} joined`;
  $("cache-none").hidden = cache.models.length > 0;
  $("cache-models").tBodies[0].replaceChildren(...cache.models.map((model) => row([
    model.id, model.kind, `${model.cache.ttl} s`, model.cache.scope, model.cache.replay,
    `${Number((model.cache.price_share * 100).toFixed(2))} %`, semantic(model.cache.semantic),
  ], { "data-id": model.id })));
}

/** Bytes as `2.3 KiB`, `64 MiB`. */
function size(bytes) {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : Number(value.toFixed(1))} ${UNITS[unit]}`;
}

function semantic(settings) {
  if (!settings) return "exact only";
  return `${settings.embedding_model} ≥ ${settings.threshold}${settings.tools ? ", with tools" : ""}`;
}
