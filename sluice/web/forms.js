// Small pieces the management pages share: a form's fields as the admin API's JSON,
// a two-step button for what cannot be undone, a status line, listings read whole.
import { usd } from "./api.js";

/** A form field as the API takes it: trimmed text, or null when empty (which clears
 * a setting on PATCH). */
export function text(form, name) {
  const value = form.elements[name].value.trim();
  return value === "" ? null : value;
}

/** A whole number field, or null when empty; anything else is refused here (it would
 * read as null, which clears the setting). */
export function integer(form, name) {
  const value = text(form, name);
  if (value === null) return null;
  if (!/^[0-9]+$/.test(value)) throw new Error(`${name}: "${value}" is not a whole number.`);
  return Number(value);
}

/** A comma-separated list, or null when empty ("any"). */
export function list(form, name) {
  const value = text(form, name);
  return value === null ? null : value.split(",").map((item) => item.trim()).filter(Boolean);
}

/** A `datetime-local` field read as UTC, as ISO 8601 with its zone; null when empty. */
export function utc(form, name) {
  const value = text(form, name);
  return value === null ? null : `${value.length === 16 ? `${value}:00` : value}Z`;
}

/** The `datetime-local` text of an ISO 8601 time in UTC (as the API answers it). */
export function localUtc(iso) {
  return iso ? new Date(iso).toISOString().slice(0, 16) : "";
}

/** Sets a field from an API value (null shows as empty). */
export function fill(form, values) {
  for (const [name, value] of Object.entries(values)) {
    form.elements[name].value = value === null || value === undefined ? "" : String(value);
  }
}

/** A button that asks once more before it acts: the first click arms it (its text
 * becomes `confirm`), a second within a few seconds acts, else it disarms. */
export function twoStep(button, confirm, act) {
  const label = button.textContent;
  let armed = null;
  button.addEventListener("click", async (event) => {
    event.stopPropagation();
    if (armed === null) {
      button.textContent = confirm;
      button.classList.add("armed");
      armed = setTimeout(() => {
        armed = null;
        button.textContent = label;
        button.classList.remove("armed");
      }, 4000);
      return;
    }
    clearTimeout(armed);
    armed = null;
    button.disabled = true;
    await act();
  });
}

/** A status line: what was done, or the gateway's refusal, as text. */
export function say(node, message, ok = true) {
  node.textContent = message;
  node.className = `message ${ok ? "ok" : "error"}`;
}

export const jsonSend = (method, body) => ({
  method, body: JSON.stringify(body), headers: { "Content-Type": "application/json" },
});
export const jsonPost = (body) => jsonSend("POST", body);

/** Every item of a cursor-paginated listing. */
export async function pages(api, path) {
  const items = [];
  let cursor = null;
  do {
    const query = new URLSearchParams({ limit: "500" });
    if (cursor) query.set("cursor", cursor);
    const page = await api.json(`${path}?${query}`);
    items.push(...page.data);
    cursor = page.has_more ? page.next_cursor : null;
  } while (cursor);
  return items;
}

export function budget(item) {
  return item.budget === null || item.budget === undefined ? "none" : `${usd(item.budget)} ${item.budget_period}`;
}

export function limits(item) {
  const parts = [];
  if (item.rpm !== null && item.rpm !== undefined) parts.push(`${item.rpm} rpm`);
  if (item.tpm !== null && item.tpm !== undefined) parts.push(`${item.tpm} tpm`);
  return parts.length ? parts.join(", ") : "config's";
}
