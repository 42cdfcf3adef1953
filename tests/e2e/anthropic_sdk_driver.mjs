// anthropic_sdk_driver.mjs: the official Anthropic Node SDK (npm
// @anthropic-ai/sdk) against the gateway, for tests/e2e/test_anthropic_sdk.py.
// Usage:
//   node anthropic_sdk_driver.mjs SDK_INDEX_MJS BASE_URL KEY CASE
// Runs one case and prints one JSON line with what the SDK gave back (or
// {"error": ...} with the SDK's error class, status, error type and message).
import { pathToFileURL } from 'node:url';

const [sdkPath, baseURL, apiKey, which] = process.argv.slice(2);
const { default: Anthropic } = await import(pathToFileURL(sdkPath).href);
const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

const tool = {
  name: 'get_weather', description: 'the weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

const cases = {
  async plain() {
    const m = await client.messages.create({
      model: 'gpt-test', max_tokens: 256, system: 'Be brief.', messages: [{ role: 'user', content: 'hi' }],
    });
    return { id: m.id, type: m.type, role: m.role, content: m.content, stop_reason: m.stop_reason, usage: m.usage };
  },
  async stream() {
    const s = client.messages.stream({
      model: 'gpt-test', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }],
    });
    let deltas = '';
    const events = [];
    s.on('text', (t) => { deltas += t; });
    s.on('streamEvent', (e) => { events.push(e.type); });
    const m = await s.finalMessage();
    return { text: m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''), deltas, events,
             stop_reason: m.stop_reason, usage: m.usage };
  },
  async tools() {
    const first = await client.messages.create({
      model: 'gpt-test', max_tokens: 256, tools: [tool], messages: [{ role: 'user', content: 'weather in Paris?' }],
    });
    const uses = first.content.filter((b) => b.type === 'tool_use');
    const back = await client.messages.create({
      model: 'gpt-test', max_tokens: 256, tools: [tool],
      messages: [{ role: 'user', content: 'weather in Paris?' }, { role: 'assistant', content: first.content },
                 { role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: 'sunny' })) }],
    });
    return { stop_reason: first.stop_reason, uses: uses.map((u) => ({ id: u.id, name: u.name, input: u.input })),
             text: back.content.filter((b) => b.type === 'text').map((b) => b.text).join('') };
  },
  async stream_tools() {
    const s = client.messages.stream({
      model: 'gpt-test', max_tokens: 256, tools: [tool], messages: [{ role: 'user', content: 'weather in Paris?' }],
    });
    let json = '';
    s.on('inputJson', (partial) => { json += partial; });
    const m = await s.finalMessage();
    return { stop_reason: m.stop_reason, uses: m.content.filter((b) => b.type === 'tool_use').map((u) => ({ name: u.name, input: u.input })), json };
  },
  async count() {
    const c = await client.messages.countTokens({ model: 'gpt-test', messages: [{ role: 'user', content: 'hello there' }] });
    return { input_tokens: c.input_tokens };
  },
  async refused() {
    await client.messages.create({
      model: 'gpt-test', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }],
    });
    return { unexpected: 'no error' };
  },
};

try {
  const out = await cases[which]();
  console.log(JSON.stringify(out));
} catch (e) {
  console.log(JSON.stringify({ error: { class: e.constructor.name, status: e.status ?? null,
                                        type: e.error?.error?.type ?? null, message: String(e.message) } }));
}
