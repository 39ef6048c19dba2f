// GET /docs: the gateway's own /openapi.json rendered as a page: every operation with
// its parameters, body, answers and security, and every schema, $refs as links.
import { el } from "./api.js";

const $ = (id) => document.getElementById(id);
const REF = "#/components/schemas/";
const MAX_DEPTH = 4;

function refName(ref) {
  return ref.startsWith(REF) ? ref.slice(REF.length) : ref;
}

/** Text whose `backticked` spans are code, as the document's descriptions write them. */
function prose(text, attrs = {}) {
  const span = el("span", null, attrs);
  String(text).split("`").forEach((part, i) => span.append(i % 2 ? el("code", part) : part));
  return span;
}

/** The type of a schema in a few words; a $ref as a link to its schema. */
function typeOf(schema) {
  if (!schema) return el("span", "any", { class: "type" });
  if (schema.$ref) {
    const name = refName(schema.$ref);
    return el("a", name, { href: `#schema-${name}`, class: "type" });
  }
  const choices = schema.anyOf ?? schema.oneOf;
  if (choices) {
    const span = el("span", null, { class: "type" });
    choices.forEach((choice, i) => {
      if (i) span.append(" | ");
      span.append(typeOf(choice));
    });
    return span;
  }
  if (schema.enum) return el("span", schema.enum.map((v) => JSON.stringify(v)).join(" | "), { class: "type" });
  if (schema.type === "array") {
    const span = el("span", "array of ", { class: "type" });
    span.append(typeOf(schema.items));
    return span;
  }
  return el("span", schema.type ?? (schema.const !== undefined ? JSON.stringify(schema.const) : "any"), { class: "type" });
}

/** An object schema's properties, one line each (nested objects up to MAX_DEPTH). */
function properties(schema, depth = 0) {
  const list = el("div", null, { class: "schema" });
  const required = new Set(schema.required ?? []);
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const line = el("div", null, {}, el("span", name, { class: "name" }), ": ", typeOf(prop));
    if (required.has(name)) line.append(" ", el("span", "required", { class: "required" }));
    if (prop.description) line.append(prose(` — ${prop.description}`, { class: "type" }));
    list.append(line);
    if (prop.type === "object" && prop.properties && depth < MAX_DEPTH) list.append(properties(prop, depth + 1));
  }
  return list;
}

function operation(path, method, op) {
  const details = el("details", null, { class: "operation", "data-path": path, "data-method": method });
  details.append(el("summary", null, {},
    el("span", method, { class: `method method-${method}` }),
    el("span", path, { class: "path" }),
    prose(op.summary ?? "", { class: "muted" })));
  const body = el("div", null, { class: "body" });
  const security = (op.security ?? []).flatMap((s) => Object.keys(s));
  body.append(el("p", `Auth: ${security.length ? security.join(" or ") : "none"}`, { class: "muted" }));
  if (op.parameters?.length) {
    body.append(el("h4", "Parameters"));
    for (const p of op.parameters) {
      body.append(el("div", null, { class: "schema" },
        el("span", p.name, { class: "name" }), ` (${p.in}): `, typeOf(p.schema)));
    }
  }
  const request = op.requestBody?.content?.["application/json"]?.schema;
  if (request) body.append(el("h4", "Body"), el("div", null, { class: "schema" }, typeOf(request)));
  body.append(el("h4", "Answers"));
  for (const [status, answer] of Object.entries(op.responses ?? {})) {
    const line = el("div", null, { class: "schema" }, el("span", status, { class: "name" }),
      " ", prose(answer.description ?? ""), " ");
    for (const [type, content] of Object.entries(answer.content ?? {})) {
      line.append(el("span", ` ${type}: `, { class: "type" }), typeOf(content.schema ?? content["x-event-schema"]));
    }
    body.append(line);
  }
  details.append(body);
  return details;
}

async function main() {
  const response = await fetch("/openapi.json");
  const doc = await response.json();
  $("version").textContent = `${doc.info.title} ${doc.info.version} · OpenAPI ${doc.openapi}`;
  const operations = $("operations");
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) operations.append(operation(path, method, op));
  }
  const schemas = $("schemas");
  for (const [name, schema] of Object.entries(doc.components?.schemas ?? {})) {
    const section = el("section", null, { id: `schema-${name}` }, el("h3", name));
    if (schema.description) section.append(el("p", null, { class: "muted" }, prose(schema.description)));
    section.append(schema.properties ? properties(schema) : el("div", null, { class: "schema" }, typeOf(schema)));
    schemas.append(section);
  }
  document.body.dataset.ready = "true";
}

main();
