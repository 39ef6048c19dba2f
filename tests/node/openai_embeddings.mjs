// The official openai SDK for Node and the Vercel AI SDK's embedMany, unchanged, against
// Sluice's POST /v1/embeddings and GET /v1/models/{id} (run by
// tests/server/test_embeddings_clients.py). Prints one JSON line of what they saw.
import OpenAI from "openai";
import { embedMany } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const baseURL = process.env.SLUICE_BASE_URL;
const apiKey = process.env.SLUICE_KEY;
const model = process.env.SLUICE_MODEL;
const texts = JSON.parse(process.env.SLUICE_TEXTS);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });

const floats = await client.embeddings.create({ model, input: texts, encoding_format: "float" });
const packed = await client.embeddings.create({ model, input: texts }); // the SDK asks for base64
const shortened = await client.embeddings.create({ model, input: texts[0], dimensions: 8 });
const retrieved = await client.models.retrieve(model);

const provider = createOpenAI({ baseURL, apiKey });
const many = await embedMany({ model: provider.embedding(model), values: texts, maxRetries: 0 });

console.log(JSON.stringify({
  floats: floats.data.map((d) => d.embedding),
  indices: floats.data.map((d) => d.index),
  packed: packed.data.map((d) => d.embedding),
  shortened: shortened.data[0].embedding.length,
  usage: floats.usage,
  retrieved,
  vercel: many.embeddings,
  vercelTokens: many.usage.tokens,
}));
