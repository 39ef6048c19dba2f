// The console's shell: sign-in (the key kept in sessionStorage only), tabs, and the
// pages a role may see: an API key gets the playground, its account's activity and
// overview; the admin key every account's, the playground on behalf of an account,
// accounts and keys to manage, and the models, routes and connections.
import { Api } from "./api.js";
import { OnBehalf, OwnKey } from "./account.js";
import { Overview } from "./charts.js";
import { Playground } from "./playground.js";
import { Activity } from "./activity.js";
import { Models } from "./models.js";
import { Operator } from "./operator.js";

const STORE = "sluice.console";
const TABS = Object.freeze({
  api: ["playground", "activity", "overview"],
  admin: ["activity", "overview", "operator", "models", "playground"],
});

const $ = (id) => document.getElementById(id);

function saved() {
  try {
    const value = JSON.parse(sessionStorage.getItem(STORE) || "null");
    return value && typeof value.key === "string" && TABS[value.role] ? value : null;
  } catch {
    return null;
  }
}

class Console {
  constructor() {
    this.pages = {};
    this.current = null;
  }

  async signIn(key) {
    const api = new Api(key);
    const role = await api.role();
    if (role === null) throw new Error("The gateway takes this key neither as an API key nor as the admin key.");
    sessionStorage.setItem(STORE, JSON.stringify({ key, role }));
    this.open(api, role);
  }

  open(api, role) {
    $("sign-in").hidden = true;
    $("app").hidden = false;
    $("tabs").hidden = false;
    $("sign-out").hidden = false;
    $("who").textContent = role === "admin" ? "operator (admin key)" : `key ${api.key.slice(0, 18)}…`;
    const activity = new Activity(api, role);
    const keys = role === "admin" ? new OnBehalf(api) : new OwnKey(api);
    const playground = new Playground(keys, {
      onFinished: () => activity.refresh(),
      openRecord: (id, via) => {
        this.show("activity");
        activity.openById(id, via);
      },
    });
    this.pages = { activity, playground, overview: new Overview(api, role) };
    if (role === "admin") Object.assign(this.pages, { operator: new Operator(api), models: new Models(api) });
    for (const button of document.querySelectorAll("#tabs button")) {
      button.hidden = !TABS[role].includes(button.dataset.tab);
      button.onclick = () => this.show(button.dataset.tab);
    }
    for (const page of Object.values(this.pages)) page.start();
    const wanted = location.hash.slice(1);
    this.show(TABS[role].includes(wanted) ? wanted : TABS[role][0]);
  }

  show(tab) {
    if (this.current !== tab) this.pages[this.current]?.hidden?.();
    this.current = tab;
    for (const section of document.querySelectorAll("section.tab")) section.hidden = section.id !== tab;
    for (const button of document.querySelectorAll("#tabs button")) {
      button.classList.toggle("active", button.dataset.tab === tab);
    }
    history.replaceState(null, "", `#${tab}`);
    this.pages[tab]?.shown?.();
  }

  signOut() {
    sessionStorage.removeItem(STORE);
    for (const page of Object.values(this.pages)) page.stop?.();
    location.hash = "";
    location.reload();
  }
}

function main() {
  const app = new Console();
  $("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = $("key-input").value.trim();
    $("sign-in-error").textContent = "";
    try {
      await app.signIn(key);
      $("key-input").value = "";
    } catch (error) {
      $("sign-in-error").textContent = error.message;
    }
  });
  $("sign-out").addEventListener("click", () => app.signOut());
  const session = saved();
  if (session) app.open(new Api(session.key), session.role);
}

main();
