// "Copy as curl / Python / JS": the playground's request as code a person runs as is,
// with the key read from $SLUICE_API_KEY (never the console's own key).

/** The request as a shell command (the body single-quoted, its own quotes escaped). */
export function curl(baseUrl, body) {
  const json = JSON.stringify(body, null, 2).replaceAll("'", "'\\''");
  return [
    `curl -N ${baseUrl}/chat/completions \\`,
    '  -H "Authorization: Bearer $SLUICE_API_KEY" \\',
    '  -H "Content-Type: application/json" \\',
    `  -d '${json}'`,
  ].join("\n");
}

/** With the official openai package for Python. */
export function python(baseUrl, body) {
  const { model, messages, stream, ...extra } = body;
  const args = [`model=${py(model)}`, `messages=${py(messages, 1)}`, "stream=True",
    ...Object.entries(extra).map(([name, value]) => `${name}=${py(value, 1)}`)];
  return [
    "import os", "", "from openai import OpenAI", "",
    `client = OpenAI(base_url=${py(baseUrl)}, api_key=os.environ["SLUICE_API_KEY"])`,
    "stream = client.chat.completions.create(",
    ...args.map((arg) => `    ${arg},`),
    ")",
    "for chunk in stream:",
    "    if chunk.choices and chunk.choices[0].delta.content:",
    '        print(chunk.choices[0].delta.content, end="", flush=True)',
    "print()",
  ].join("\n");
}

/** With the official openai package for Node. */
export function javascript(baseUrl, body) {
  return [
    'import OpenAI from "openai";', "",
    `const client = new OpenAI({ baseURL: ${JSON.stringify(baseUrl)}, apiKey: process.env.SLUICE_API_KEY });`,
    `const stream = await client.chat.completions.create(${JSON.stringify(body, null, 2)});`,
    "for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? \"\");",
    'process.stdout.write("\\n");',
  ].join("\n");
}

/** A JSON value as a Python literal (JSON's string escapes are Python's too). */
function py(value, depth = 0) {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value !== "object") return JSON.stringify(value);
  const pad = "    ".repeat(depth + 1);
  const end = "    ".repeat(depth);
  const items = Array.isArray(value)
    ? value.map((item) => py(item, depth + 1))
    : Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${py(v, depth + 1)}`);
  const [open, close] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  return items.length ? `${open}\n${items.map((i) => `${pad}${i},`).join("\n")}\n${end}${close}` : `${open}${close}`;
}
