// An account's keys (admin key): the list with each key's policy and spend; a new
// key, whose secret is shown once with a copy button; a key's allow-list, budget,
// limits and expiry edited; rotate (a new secret, shown once) and revoke, each asked
// twice.
import { el, orDash, row, usd } from "./api.js";
import { budget, fill, integer, jsonPost, jsonSend, limits, list, localUtc, pages, text, twoStep, utc } from "./forms.js";

const $ = (id) => document.getElementById(id);

export class Keys {
  constructor(api, say) {
    this.api = api;
    this.say = say;
    this.account = null;
    this.editing = null;
  }

  start() {
    $("new-key").addEventListener("click", () => this.edit(null));
    $("key-cancel").addEventListener("click", () => { $("key-form").hidden = true; });
    $("key-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await this.save();
      } catch (error) {
        this.say(error.message, false);
      }
    });
    $("copy-secret").addEventListener("click", async () => {
      await navigator.clipboard.writeText($("secret").textContent);
      $("copy-secret").textContent = "Copied";
    });
    $("dismiss-secret").addEventListener("click", () => this.secret(null));
  }

  async show(account) {
    if (account !== this.account) {
      $("key-form").hidden = true;
      this.secret(null);
    }
    this.account = account;
    const keys = await pages(this.api, `/admin/accounts/${encodeURIComponent(account)}/keys`);
    if (this.account !== account) return; // another account was chosen meanwhile
    $("keys").tBodies[0].replaceChildren(...keys.map((key) => this.keyRow(key)));
  }

  keyRow(key) {
    const actions = el("span", null, { class: "actions" });
    const tr = row([
      key.prefix, orDash(key.name), key.models ? key.models.join(", ") || "none" : "any", budget(key),
      usd(key.spent), limits(key), key.expires_at ? key.expires_at.replace("T", " ").replace("Z", " UTC") : "never",
      key.revoked ? "revoked" : "active", actions,
    ], { "data-prefix": key.prefix, "data-id": key.id });
    if (key.revoked) return tr;
    const edit = el("button", "Edit", { type: "button", class: "small" });
    edit.onclick = () => this.edit(key);
    const rotate = el("button", "Rotate", { type: "button", class: "small" });
    twoStep(rotate, "Confirm rotate", () => this.act(() => this.rotate(key)));
    const revoke = el("button", "Revoke", { type: "button", class: "small danger" });
    twoStep(revoke, "Confirm revoke", () => this.act(() => this.revoke(key)));
    actions.append(edit, rotate, revoke);
    return tr;
  }

  async act(change) {
    try {
      await change();
    } catch (error) {
      this.say(error.message, false);
    }
    await this.show(this.account);
  }

  /** Opens the form for a new key (null) or to edit one. */
  edit(key) {
    this.editing = key;
    const form = $("key-form");
    form.reset();
    form.hidden = false;
    $("key-form-title").textContent = key ? `Edit ${key.prefix}` : `New key for ${this.account}`;
    $("key-save").textContent = key ? "Save key" : "Create key";
    if (key) {
      fill(form, {
        label: key.name, models: key.models ? key.models.join(", ") : null, budget: key.budget,
        budget_period: key.budget_period, rpm: key.rpm, tpm: key.tpm, expires_at: localUtc(key.expires_at),
      });
    }
    form.elements.label.focus();
  }

  fields() {
    const form = $("key-form");
    return {
      label: text(form, "label"), models: list(form, "models"), budget: text(form, "budget"),
      budget_period: text(form, "budget_period"), rpm: integer(form, "rpm"), tpm: integer(form, "tpm"),
      expires_at: utc(form, "expires_at"),
    };
  }

  async save() {
    const fields = this.fields();
    if (this.editing) {
      const path = `/admin/keys/${encodeURIComponent(this.editing.prefix)}`;
      await this.api.json(path, jsonSend("PATCH", fields));
      this.say(`Saved ${this.editing.prefix}.`);
    } else {
      const given = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null));
      const path = `/admin/accounts/${encodeURIComponent(this.account)}/keys`;
      const made = await this.api.json(path, jsonPost(given));
      this.secret(made.key, `New key ${made.prefix}`);
      this.say(`Key ${made.prefix} created for ${this.account}.`);
    }
    $("key-form").hidden = true;
    await this.show(this.account);
  }

  async rotate(key) {
    const made = await this.api.json(`/admin/keys/${encodeURIComponent(key.prefix)}/rotate`, jsonPost({}));
    this.secret(made.key, `New secret for ${orDash(key.name)} (was ${key.prefix})`);
    this.say(`Rotated: ${key.prefix} no longer works; its policy and spend stay.`);
  }

  async revoke(key) {
    await this.api.json("/admin/keys/revoke", jsonPost({ id: key.id }));
    this.say(`Revoked ${key.prefix}.`);
  }

  /** Shows a secret once (null hides it: it is not kept anywhere). */
  secret(value, title = "") {
    $("secret-box").hidden = value === null;
    $("secret").textContent = value ?? "";
    $("secret-title").textContent = title;
    $("copy-secret").textContent = "Copy";
  }
}
