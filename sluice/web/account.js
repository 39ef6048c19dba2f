// The key the playground chats with: an API key's own, or for the operator a key made
// for the chosen account through the admin API (label "console playground", expiring
// in an hour), kept in this tab's session storage while it lives and revoked at
// sign-out. Its requests are that account's: charged, limited and logged as such.
import { Api, el } from "./api.js";
import { jsonPost, pages } from "./forms.js";

const $ = (id) => document.getElementById(id);
const STORE = "sluice.console.playground";
const LIFETIME_S = 3600;
const LABEL = "console playground";

/** An API key's own key. */
export class OwnKey {
  constructor(api) {
    this.api = api;
    this.started = false;
  }

  async start(use) {
    await use(this.api);
  }

  stop() {}
}

/** The operator's key for a chosen account. */
export class OnBehalf {
  constructor(admin) {
    this.admin = admin;
    this.started = false;
  }

  async start(use) {
    $("as-account-label").hidden = false;
    $("on-behalf").hidden = false;
    const accounts = await pages(this.admin, "/admin/accounts");
    const select = $("as-account");
    select.replaceChildren(...accounts.map((a) => el("option", a.name, { value: a.name })));
    select.value = accounts.find((a) => a.name !== "dev")?.name ?? accounts[0]?.name ?? "";
    select.onchange = async () => use(await this.keyFor(select.value));
    if (select.value) await use(await this.keyFor(select.value));
  }

  async keyFor(account) {
    const kept = saved();
    const now = Date.now() / 1000;
    if (kept[account] && kept[account].expires_at > now + 60) return new Api(kept[account].key);
    const expires = new Date((now + LIFETIME_S) * 1000).toISOString().replace(/\.\d+Z$/, "Z");
    const path = `/admin/accounts/${encodeURIComponent(account)}/keys`;
    const made = await this.admin.json(path, jsonPost({ label: LABEL, expires_at: expires }));
    kept[account] = { key: made.key, id: made.id, expires_at: Date.parse(made.expires_at) / 1000 };
    sessionStorage.setItem(STORE, JSON.stringify(kept));
    return new Api(made.key);
  }

  /** Revokes the keys this tab made (at sign-out; they would expire within the hour). */
  stop() {
    for (const { id } of Object.values(saved())) {
      fetch("/admin/keys/revoke", { ...jsonPost({ id }), headers: this.admin.headers({ "Content-Type": "application/json" }), keepalive: true });
    }
    sessionStorage.removeItem(STORE);
  }
}

function saved() {
  try {
    return JSON.parse(sessionStorage.getItem(STORE) || "{}") ?? {};
  } catch {
    return {};
  }
}
