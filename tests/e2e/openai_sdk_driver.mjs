// openai_sdk_driver.mjs: the official OpenAI Node SDK (npm openai) against
// the gateway, for tests/e2e/test_openai_sdk.py. Usage:
//   node openai_sdk_driver.mjs SDK_INDEX_MJS BASE_URL KEY CASE
// Runs one case and prints one JSON line with what the SDK gave back (or
// {"error": ...} with the SDK's error class, status and message).
import { pathToFileURL } from 'node:url';

const [sdkPath, baseURL, apiKey, which] = process.argv.slice(2);
const { default: OpenAI } = await import(pathToFileURL(sdkPath).href);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });

const tool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'the weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};
const rtool = { type: 'function', name: 'get_weather', description: 'the weather in a city',
                parameters: tool.function.parameters, strict: false };

const cases = {
  // the SDK's defaults: no stream, no store, no instructions
  async responses_plain() {
    const r = await client.responses.create({ model: 'gpt-test', input: 'hi' });
    return { id: r.id, text: r.output_text, status: r.status, usage: r.usage };
  },
  async responses_stream() {
    const s = client.responses.stream({ model: 'gpt-test', input: 'hi', instructions: 'Be brief.' });
    let deltas = '';
    s.on('response.output_text.delta', (e) => { deltas += e.delta; });
    const r = await s.finalResponse();
    return { id: r.id, text: r.output_text, deltas, status: r.status };
  },
  async responses_tools() {
    const r = await client.responses.create({ model: 'gpt-test', input: 'weather in Paris?', tools: [rtool] });
    const calls = r.output.filter((i) => i.type === 'function_call');
    const back = await client.responses.create({
      model: 'gpt-test', tools: [rtool],
      input: [{ role: 'user', content: 'weather in Paris?' }, ...calls,
              ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: 'sunny' }))],
    });
    return { calls: calls.map((c) => ({ name: c.name, args: JSON.parse(c.arguments), call_id: c.call_id })),
             text: back.output_text };
  },
  async responses_chain() {
    const one = await client.responses.create({ model: 'gpt-test', input: 'one' });
    const two = await client.responses.create({ model: 'gpt-test', input: 'two', previous_response_id: one.id });
    const got = await client.responses.retrieve(two.id);
    const items = await client.responses.inputItems.list(two.id);
    await client.responses.delete(two.id);
    let gone = null;
    try { await client.responses.retrieve(two.id); } catch (e) { gone = e.status; }
    return { one: one.id, two: two.id, got: got.id, prev: got.previous_response_id, text: got.output_text,
             items: items.data.length, gone };
  },
  async chat_plain() {
    const c = await client.chat.completions.create({
      model: 'gpt-test', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }] });
    return { text: c.choices[0].message.content, finish: c.choices[0].finish_reason, usage: c.usage };
  },
  async chat_stream() {
    const s = await client.chat.completions.create({
      model: 'gpt-test', stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }] });
    let text = '', usage = null, finish = null;
    for await (const ch of s) {
      text += ch.choices[0]?.delta?.content || '';
      finish = ch.choices[0]?.finish_reason || finish;
      usage = ch.usage || usage;
    }
    return { text, finish, usage };
  },
  async chat_tools() {
    const s = client.chat.completions.stream({
      model: 'gpt-test', tools: [tool], messages: [{ role: 'user', content: 'weather in Paris and Rome?' }] });
    const c = await s.finalChatCompletion();
    const msg = c.choices[0].message;
    const back = await client.chat.completions.create({
      model: 'gpt-test', tools: [tool],
      messages: [{ role: 'user', content: 'weather in Paris and Rome?' }, msg,
                 ...msg.tool_calls.map((t) => ({ role: 'tool', tool_call_id: t.id, content: 'sunny' }))] });
    return { finish: c.choices[0].finish_reason,
             calls: msg.tool_calls.map((t) => ({ id: t.id, name: t.function.name, args: JSON.parse(t.function.arguments) })),
             text: back.choices[0].message.content };
  },
  async chat_refused() {
    await client.chat.completions.create({ model: 'gpt-test', n: 2, messages: [{ role: 'user', content: 'hi' }] });
    return { unexpected: 'no error' };
  },
};

try {
  console.log(JSON.stringify(await cases[which]()));
} catch (e) {
  console.log(JSON.stringify({ error: e.constructor.name, status: e.status ?? null, message: String(e.message),
                               code: e.code ?? null, param: e.param ?? null }));
}
