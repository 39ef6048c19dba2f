// Accounts (admin key): the list with balances, budgets and limits; a new account;
// credits posted to the ledger (negative removes); an account's budget and per-minute
// limits; and its keys (keys.js). Every change goes through the admin API and the
// page shows the gateway's own refusal when there is one.
import { row, usd } from "./api.js";
import { budget, fill, integer, jsonPost, jsonSend, limits, pages, say, text } from "./forms.js";
import { Keys } from "./keys.js";

const $ = (id) => document.getElementById(id);

export class Operator {
  constructor(api) {
    this.api = api;
    this.account = null;
    this.accounts = new Map();
    this.keys = new Keys(api, (message, ok) => this.say(message, ok));
  }

  start() {
    $("new-account").addEventListener("submit", (event) => this.submit(event, () => this.create()));
    $("credit-form").addEventListener("submit", (event) => this.submit(event, () => this.credit()));
    $("account-limits").addEventListener("submit", (event) => this.submit(event, () => this.limits()));
    this.keys.start();
    this.refresh();
  }

  shown() {
    this.refresh();
  }

  say(message, ok = true) {
    say($("operator-message"), message, ok);
  }

  /** Runs one change; its refusal is shown, not thrown. */
  async submit(event, change) {
    event.preventDefault();
    try {
      await change();
    } catch (error) {
      this.say(error.message, false);
    }
  }

  async refresh() {
    const accounts = await pages(this.api, "/admin/accounts");
    this.accounts = new Map(accounts.map((account) => [account.name, account]));
    $("accounts").tBodies[0].replaceChildren(...accounts.map((account) => {
      const tr = row([
        account.name, usd(account.balance), usd(account.held), budget(account),
        account.spent === undefined ? "–" : usd(account.spent), limits(account), String(account.open_holds),
      ], { "data-name": account.name, class: "clickable" });
      tr.onclick = () => this.select(account.name);
      return tr;
    }));
    const wanted = this.account ?? accounts.find((a) => a.name !== "dev")?.name ?? accounts[0]?.name;
    if (wanted) await this.select(wanted);
  }

  async select(name) {
    this.account = name;
    const account = this.accounts.get(name);
    for (const tr of $("accounts").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.name === name);
    $("account-panel").hidden = false;
    $("keys-account").textContent = name;
    fill($("account-limits"), {
      budget: account?.budget, budget_period: account?.budget_period ?? "never",
      rpm: account?.rpm, tpm: account?.tpm,
    });
    await this.keys.show(name);
  }

  async create() {
    const form = $("new-account");
    const body = { name: text(form, "name"), metered: form.elements.metered.checked };
    if (text(form, "credits") !== null) body.credits = text(form, "credits");
    const made = await this.api.json("/admin/accounts", jsonPost(body));
    form.reset();
    $("new-account-box").open = false;
    this.account = made.name;
    this.say(`Account ${made.name} created with ${usd(made.balance)}.`);
    await this.refresh();
  }

  async credit() {
    const form = $("credit-form");
    const amount = text(form, "amount");
    const path = `/admin/accounts/${encodeURIComponent(this.account)}/credits`;
    const after = await this.api.json(path, jsonPost({ amount }));
    form.reset();
    this.say(`Posted ${usd(amount)} to ${after.name}: the balance is ${usd(after.balance)}.`);
    await this.refresh();
  }

  async limits() {
    const form = $("account-limits");
    const body = {
      budget: text(form, "budget"), budget_period: text(form, "budget_period"),
      rpm: integer(form, "rpm"), tpm: integer(form, "tpm"),
    };
    const path = `/admin/accounts/${encodeURIComponent(this.account)}`;
    await this.api.json(path, jsonSend("PATCH", body));
    this.say(`Saved the budget and limits of ${this.account}.`);
    await this.refresh();
  }
}
