// The official openai SDK, unchanged, against Sluice's POST /v1/responses and its stored
// responses (retrieve, delete, input items).
//
// Run by tests/server/test_responses_node.py, which starts the gateway and scripts its
// upstreams. Environment: SLUICE_BASE_URL (the gateway's /v1), SLUICE_KEY (a Sluice
// key), SLUICE_SCENARIOS (comma-separated, run in that order), each `name:model`, or for
// the conversation `conversation:model+model+model` (one model per turn). Prints one
// JSON line per scenario: {"scenario" (as given), ...what the SDK saw}; an unexpected
// exception is reported as {"scenario", "crash": {...}}, never thrown.

import OpenAI from 'openai';

const BASE_URL = process.env.SLUICE_BASE_URL;
const KEY = process.env.SLUICE_KEY;
const SCENARIOS = (process.env.SLUICE_SCENARIOS ?? '').split(',').filter(Boolean);

const WEATHER = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};

const client = new OpenAI({ baseURL: BASE_URL, apiKey: KEY, maxRetries: 0 });

/** What an exception is, as the SDK made it: its class, status and parsed error. */
function describe(err) {
  const sdkClasses = [
    'NotFoundError',
    'BadRequestError',
    'AuthenticationError',
    'InternalServerError',
    'APIConnectionError',
    'APIError',
    'OpenAIError',
  ];
  return {
    class: err?.constructor?.name ?? typeof err,
    instanceOf: sdkClasses.filter((name) => err instanceof OpenAI[name]),
    status: err?.status ?? null,
    code: err?.code ?? null,
    param: err?.param ?? null,
    error: err?.error ?? null,
    message: String(err?.message ?? err),
  };
}

/** Run a call that should fail; what it threw, or what it answered instead. */
async function expectError(call) {
  try {
    return { answered: await call() };
  } catch (err) {
    return { error: describe(err) };
  }
}

/** responses.stream() read to its end: every event's type, the deltas, the final response. */
async function readStream(params) {
  const stream = client.responses.stream(params);
  const texts = [];
  const argumentDeltas = [];
  let argumentsDone = null;
  stream.on('response.output_text.delta', (event) => texts.push(event.delta));
  stream.on('response.function_call_arguments.delta', (event) => argumentDeltas.push(event.delta));
  stream.on('response.function_call_arguments.done', (event) => (argumentsDone = event.arguments));
  const events = [];
  for await (const event of stream) events.push(event.type);
  const final = await stream.finalResponse();
  return { events, texts, argumentDeltas, argumentsDone, final };
}

const scenarios = {
  /** responses.create({stream: true}) iterated to response.completed. */
  async create_stream([model]) {
    const stream = await client.responses.create({ model, input: 'Say hello', stream: true });
    const events = [];
    const sequence = [];
    const texts = [];
    let completed = null;
    for await (const event of stream) {
      events.push(event.type);
      sequence.push(event.sequence_number);
      if (event.type === 'response.output_text.delta') texts.push(event.delta);
      if (event.type === 'response.completed') completed = event.response;
    }
    return { events, sequence, texts, completed };
  },

  /** responses.stream()'s finalResponse() for a text answer. */
  async stream_text([model]) {
    return readStream({ model, input: 'Say hello' });
  },

  /** responses.stream()'s finalResponse() for a function call. */
  async stream_tool([model]) {
    return readStream({
      model,
      input: 'Weather in Oslo?',
      tools: [WEATHER],
      tool_choice: { type: 'function', name: 'get_weather' },
    });
  },

  /** previous_response_id over three turns: a call, its output answered, a question. */
  async conversation([first, second, third]) {
    const one = await client.responses.create({
      model: first,
      input: 'Weather in Oslo?',
      tools: [WEATHER],
    });
    const call = one.output.find((item) => item.type === 'function_call');
    const two = await client.responses.create({
      model: second,
      previous_response_id: one.id,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '4 C' }],
      tools: [WEATHER],
    });
    const stream = client.responses.stream({
      model: third,
      previous_response_id: two.id,
      input: 'Which city did I ask about?',
    });
    const three = await stream.finalResponse();
    const items = [];
    for await (const item of client.responses.inputItems.list(three.id, { order: 'asc' })) {
      items.push(item);
    }
    return { turns: [one, two, three], items };
  },

  /** A stored response: retrieve, input items paged one by one, delete, then 404s. */
  async stored([model]) {
    const made = await client.responses.create({
      model,
      instructions: 'Be brief.',
      input: [
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi!' },
        { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'More' }] },
      ],
      metadata: { ticket: 't-1' },
    });
    const retrieved = await client.responses.retrieve(made.id);
    const newestFirst = await client.responses.inputItems.list(made.id);
    const firstPage = await client.responses.inputItems.list(made.id, { limit: 1, order: 'asc' });
    const pages = [];
    for await (const page of firstPage.iterPages()) {
      pages.push({ data: page.data, has_more: page.has_more, next: page.hasNextPage() });
    }
    const deleting = await client.responses.delete(made.id).asResponse();
    const deleted = { status: deleting.status, body: await deleting.json() };
    const after = {
      retrieve: await expectError(() => client.responses.retrieve(made.id)),
      inputItems: await expectError(() => client.responses.inputItems.list(made.id)),
      delete: await expectError(() => client.responses.delete(made.id)),
    };
    return { made, retrieved, newestFirst: newestFirst.data, pages, deleted, after };
  },
};

for (const entry of SCENARIOS) {
  const [name, models = ''] = entry.split(':');
  let result;
  try {
    if (!(name in scenarios)) throw new Error(`no scenario ${name}`);
    result = await scenarios[name](models.split('+'));
  } catch (err) {
    result = { crash: { ...describe(err), stack: err?.stack ?? null } };
  }
  process.stdout.write(JSON.stringify({ scenario: entry, ...result }) + '\n');
}
