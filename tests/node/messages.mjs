// The official @anthropic-ai/sdk, unchanged, against Sluice's POST /v1/messages.
//
// Run by tests/server/test_messages_node.py, which starts the gateway and scripts its
// upstream. Environment: SLUICE_BASE_URL (the gateway, without /v1), SLUICE_KEY (a
// Sluice key), SLUICE_MODEL, SLUICE_SCENARIOS (names below, comma-separated, run in
// that order). Prints one JSON line per scenario: {"scenario", ...what the SDK saw};
// an unexpected exception is reported as {"scenario", "crash": {...}}, never thrown.

import Anthropic from '@anthropic-ai/sdk';

const BASE_URL = process.env.SLUICE_BASE_URL;
const KEY = process.env.SLUICE_KEY;
const MODEL = process.env.SLUICE_MODEL;
const SCENARIOS = (process.env.SLUICE_SCENARIOS ?? '').split(',').filter(Boolean);

const USER = [{ role: 'user', content: 'Say hello' }];
const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgx+/==';
const WEATHER = {
  name: 'get_weather',
  description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } } },
};
const TURNS = [
  { role: 'user', content: 'Weather in Oslo?' },
  {
    role: 'assistant',
    content: [
      { type: 'thinking', thinking: 'Use the tool.', signature: SIGNATURE },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Oslo' } },
    ],
  },
  {
    role: 'user',
    content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }],
  },
];

const client = new Anthropic({ baseURL: BASE_URL, apiKey: KEY, maxRetries: 0 });

/** What an exception is, as the SDK made it: its class, status and parsed body. */
function describe(err) {
  const sdkClasses = [
    'NotFoundError',
    'AuthenticationError',
    'RateLimitError',
    'BadRequestError',
    'InternalServerError',
    'APIConnectionError',
    'APIError',
    'AnthropicError',
  ];
  return {
    class: err?.constructor?.name ?? typeof err,
    instanceOf: sdkClasses.filter((name) => err instanceof Anthropic[name]),
    status: err?.status ?? null,
    type: err?.type ?? null,
    body: err?.error ?? null,
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

/** A stream read three ways: text events, every event's type, the final message. */
async function readStream(params) {
  const stream = client.messages.stream(params);
  const seen = { texts: [], thinking: [], signatures: [], json: [] };
  stream.on('text', (delta) => seen.texts.push(delta));
  stream.on('thinking', (delta) => seen.thinking.push(delta));
  stream.on('signature', (signature) => seen.signatures.push(signature));
  stream.on('inputJson', (_partial, snapshot) => seen.json.push(snapshot));
  const events = [];
  let ending = null;
  for await (const event of stream) {
    events.push(event.type);
    if (event.type === 'message_delta') ending = event;
  }
  const message = await stream.finalMessage();
  return { ...seen, events, ending, message };
}

const scenarios = {
  async create() {
    const { data, response } = await client.messages
      .create({ model: MODEL, max_tokens: 100, messages: USER })
      .withResponse();
    return { message: data, requestId: response.headers.get('x-request-id') };
  },

  async stream() {
    return readStream({ model: MODEL, max_tokens: 100, messages: USER });
  },

  async tool() {
    return readStream({
      model: MODEL,
      max_tokens: 100,
      messages: USER,
      tools: [WEATHER],
      tool_choice: { type: 'tool', name: 'get_weather' },
    });
  },

  async thinking() {
    return readStream({
      model: MODEL,
      max_tokens: 4000,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      messages: USER,
    });
  },

  async conversation() {
    const message = await client.messages.create({
      model: MODEL,
      max_tokens: 4000,
      messages: TURNS,
      tools: [WEATHER],
      thinking: { type: 'enabled', budget_tokens: 1024 },
    });
    return { message, turns: TURNS };
  },

  async not_found() {
    return expectError(() =>
      client.messages.create({ model: 'test/nope', max_tokens: 5, messages: USER }),
    );
  },

  async auth() {
    const stranger = new Anthropic({
      baseURL: BASE_URL,
      apiKey: 'sk-sluice-' + 'x'.repeat(40),
      maxRetries: 0,
    });
    return expectError(() =>
      stranger.messages.create({ model: MODEL, max_tokens: 5, messages: USER }),
    );
  },

  async rate_limit() {
    return expectError(() =>
      client.messages.create({ model: MODEL, max_tokens: 5, messages: USER }),
    );
  },

  async mid_stream() {
    const stream = client.messages.stream({ model: MODEL, max_tokens: 100, messages: USER });
    const texts = [];
    try {
      for await (const event of stream) {
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
          texts.push(event.delta.text);
        }
      }
    } catch (err) {
      const final = await stream.finalMessage().then(
        () => 'resolved',
        (again) => (again === err ? 'rejected with the same error' : describe(again)),
      );
      return { texts, error: describe(err), final };
    }
    return { texts, completed: true };
  },
};

for (const name of SCENARIOS) {
  let result;
  try {
    if (!(name in scenarios)) throw new Error(`no scenario ${name}`);
    result = await scenarios[name]();
  } catch (err) {
    result = { crash: { ...describe(err), stack: err?.stack ?? null } };
  }
  process.stdout.write(JSON.stringify({ scenario: name, ...result }) + '\n');
}
