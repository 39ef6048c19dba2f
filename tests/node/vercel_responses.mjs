// The Vercel AI SDK's openai.responses() model, unchanged, against Sluice's
// POST /v1/responses (run by tests/agents/test_vercel_ai.py): streamText of plain text,
// then a tool the SDK runs itself, its result sent back for the final answer.
// Prints one JSON line of what the SDK saw.
import { streamText, tool, jsonSchema, stepCountIs } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const openai = createOpenAI({ baseURL: process.env.SLUICE_BASE_URL, apiKey: process.env.SLUICE_KEY });
const model = openai.responses(process.env.SLUICE_MODEL);

const plain = streamText({ model, prompt: "Say hello" });
let text = "";
for await (const delta of plain.textStream) text += delta;

const withTool = streamText({
  model,
  prompt: "Weather in Oslo?",
  stopWhen: stepCountIs(3),
  tools: {
    get_weather: tool({
      description: "The weather in a city.",
      inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
      execute: async ({ city }) => `sunny, 21C in ${city}`,
    }),
  },
});
let answer = "";
for await (const delta of withTool.textStream) answer += delta;
const steps = await withTool.steps;
const calls = steps.flatMap((step) => step.toolCalls.map((c) => ({ name: c.toolName, input: c.input })));
console.log(JSON.stringify({ text, answer, calls, usage: (await plain.usage) }));
