#!/usr/bin/env node
// bench/h2c_upstream.cjs: an OpenAI-style upstream speaking cleartext HTTP/2
// (h2c, prior knowledge) for the gateway's SWITCHYARD_UPSTREAM_H2C, with the
// answers of bench/fast_upstream.c: the same canned bodies and events, and
// the same long-lived streams ("bench_hold_ms" / "bench_interval_ms" in the
// body, or --hold-ms / --gap-ms for every streamed request), whose later
// deltas carry "bench_t", CLOCK_MONOTONIC in microseconds when written (what
// bench/stream_client.c reads to compute each event's delay and gaps).
//
// A connection whose first bytes are not the HTTP/2 preface is served as
// HTTP/1.1 by the same handler, so one instance serves both the gateway with
// and without the setting (and bench/stream_client, which speaks HTTP/1.1);
// every request records the protocol it came in.
//
//   POST .../chat/completions, .../responses   plain JSON or SSE
//   GET  .../models, /_health
//   GET  /_stats   {"h2_sessions_open", "h2_sessions_total", "h2_sessions_max",
//                   "h1_connections_total", "requests_h2", "requests_h1",
//                   "streams_open", "streams_max", "last_protocol"}
//                  (requests_*: API requests, not /_stats or /_health)
//
// usage: node h2c_upstream.cjs [--port N] [--host A] [--max-streams N]
//                              [--hold-ms N] [--gap-ms N]
// (port 0, the default, picks a free one; prints "listening on PORT").
// Bench tool and e2e test upstream (tests/e2e/test_upstream_h2c.py); Node.js
// built-ins only. --max-streams is the SETTINGS_MAX_CONCURRENT_STREAMS it
// announces (default 100 000: curl's own limit, 100 per connection, applies).
'use strict';
const http = require('http');
const http2 = require('http2');
const net = require('net');

const opt = { port: 0, host: '127.0.0.1', maxStreams: 100000, holdMs: 0, gapMs: 1000 };
for (let i = 2; i + 1 < process.argv.length; i += 2) {
  const k = process.argv[i], v = process.argv[i + 1];
  if (k === '--port') opt.port = Number(v);
  else if (k === '--host') opt.host = v;
  else if (k === '--max-streams') opt.maxStreams = Number(v);
  else if (k === '--hold-ms') opt.holdMs = Number(v);
  else if (k === '--gap-ms') opt.gapMs = Number(v);
  else { console.error(`unknown option ${k}`); process.exit(2); }
}

// ---------- canned bodies (bench/fast_upstream.c's, byte for byte) ----------
const WORDS = ['Hello', ' from', ' the', ' fast', ' mock', ' upstream', ',', ' bench.'];
const CHAT_HEAD = 'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,' +
  '"model":"gpt-bench","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n';
const CHAT_DELTA = WORDS.map((w) => 'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,' +
  `"model":"gpt-bench","choices":[{"index":0,"delta":{"content":"${w}"},"finish_reason":null}]}\n\n`);
const CHAT_TAIL = 'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,' +
  '"model":"gpt-bench","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],' +
  '"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}\n\ndata: [DONE]\n\n';
const RESP_HEAD = 'event: response.created\n' +
  'data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_bench",' +
  '"object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-bench","output":[]}}\n\n';
const RESP_DELTA = WORDS.map((w, i) => 'event: response.output_text.delta\n' +
  `data: {"type":"response.output_text.delta","sequence_number":${i + 1},"item_id":"msg_bench",` +
  `"output_index":0,"content_index":0,"delta":"${w}"}\n\n`);
const RESP_TAIL = 'event: response.completed\n' +
  'data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_bench",' +
  '"object":"response","created_at":1700000000,"status":"completed","model":"gpt-bench",' +
  '"output":[{"type":"message","id":"msg_bench","status":"completed","role":"assistant",' +
  '"content":[{"type":"output_text","text":"Hello from the fast mock upstream, bench.",' +
  '"annotations":[]}]}],"usage":{"input_tokens":12,"output_tokens":8,"total_tokens":20}}}\n\n';
const CHAT_PLAIN = '{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,' +
  '"model":"gpt-bench","choices":[{"index":0,"message":{"role":"assistant",' +
  '"content":"Hello from the fast mock upstream, bench."},"finish_reason":"stop"}],' +
  '"usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20}}';
const RESP_PLAIN = '{"id":"resp_bench","object":"response","created_at":1700000000,"status":"completed",' +
  '"model":"gpt-bench","output":[{"type":"message","id":"msg_bench","status":"completed",' +
  '"role":"assistant","content":[{"type":"output_text","text":' +
  '"Hello from the fast mock upstream, bench.","annotations":[]}]}],' +
  '"usage":{"input_tokens":12,"output_tokens":8,"total_tokens":20}}';
const MODELS = '{"object":"list","data":[{"id":"gpt-bench","object":"model",' +
  '"created":1700000000,"owned_by":"bench"}]}';
const NOT_FOUND = '{"error":{"message":"h2c_upstream: unknown endpoint",' +
  '"type":"invalid_request_error","code":"unknown_url"}}';

// ---------- counters (GET /_stats) ----------
const st = {
  h2_sessions_open: 0, h2_sessions_total: 0, h2_sessions_max: 0, h1_connections_total: 0,
  requests_h2: 0, requests_h1: 0, streams_open: 0, streams_max: 0, last_protocol: '',
};

const monoUs = () => process.hrtime.bigint() / 1000n; // uv_hrtime: CLOCK_MONOTONIC, as fast_upstream's

// An event with "bench_t" put right after its "data: {".
function stamped(ev) {
  const at = ev.indexOf('data: {') + 7;
  return ev.slice(0, at) + `"bench_t":${monoUs()},` + ev.slice(at);
}

function findLong(body, key) {
  const m = new RegExp(`"${key}"\\s*:\\s*(\\d+)`).exec(body);
  return m ? Number(m[1]) : 0;
}

function send(res, code, body) {
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// A long-lived stream: the head and first delta at once, delta k due k
// intervals after the start (a late one does not shift the rest), the
// terminal event hold ms after the start.
function hold(res, chat, holdMs, gapMs) {
  const head = chat ? CHAT_HEAD : RESP_HEAD, deltas = chat ? CHAT_DELTA : RESP_DELTA;
  const start = Date.now();
  let sent = 1, timer = null, open = true;
  st.streams_open++;
  if (st.streams_open > st.streams_max) st.streams_max = st.streams_open;
  const done = () => { if (open) { open = false; st.streams_open--; clearTimeout(timer); } };
  res.on('close', done);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write(head + deltas[0]);
  const arm = () => {
    const due = Math.min(sent * gapMs, holdMs);
    timer = setTimeout(tick, Math.max(0, start + due - Date.now()));
  };
  const tick = () => {
    if (!open) return;
    if (sent * gapMs < holdMs) {
      res.write(stamped(deltas[sent % deltas.length]));
      sent++;
      arm();
      return;
    }
    res.end(chat ? CHAT_TAIL : RESP_TAIL);
    done();
  };
  arm();
}

function handle(req, res) {
  const path = req.url.split('?')[0];
  if (path === '/_health') return send(res, 200, '{"ok":true}\n');
  if (path === '/_stats') return send(res, 200, JSON.stringify(st));
  const h2 = req.httpVersionMajor === 2; // counted for the API only, not for these two
  if (h2) st.requests_h2++; else st.requests_h1++;
  st.last_protocol = h2 ? 'h2' : 'http/1.1';
  if (path.endsWith('/models')) return send(res, 200, MODELS);
  const chat = path.endsWith('/chat/completions');
  if ((!chat && !path.endsWith('/responses')) || req.method !== 'POST') return send(res, 404, NOT_FOUND);
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts).toString();
    const holdMs = findLong(body, 'bench_hold_ms');
    const stream = /"stream"\s*:\s*true/.test(body);
    if (holdMs > 0) return hold(res, chat, holdMs, findLong(body, 'bench_interval_ms') || findLong(body, 'bench_gap_ms') || 1000);
    if (stream && opt.holdMs > 0) return hold(res, chat, opt.holdMs, opt.gapMs);
    if (!stream) return send(res, 200, chat ? CHAT_PLAIN : RESP_PLAIN);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.end((chat ? CHAT_HEAD : RESP_HEAD) + (chat ? CHAT_DELTA : RESP_DELTA).join('') + (chat ? CHAT_TAIL : RESP_TAIL));
  });
}

const h2 = http2.createServer({ settings: { maxConcurrentStreams: opt.maxStreams } }, handle);
h2.on('session', (s) => {
  st.h2_sessions_open++;
  st.h2_sessions_total++;
  if (st.h2_sessions_open > st.h2_sessions_max) st.h2_sessions_max = st.h2_sessions_open;
  s.on('close', () => st.h2_sessions_open--);
  s.on('error', () => {});
});
const h1 = http.createServer({ keepAliveTimeout: 60000 }, handle);
h1.on('connection', () => st.h1_connections_total++);

// The HTTP/2 client preface starts "PRI * HTTP/2.0": such a connection goes
// to the HTTP/2 server, any other to the HTTP/1.1 one, its first bytes
// put back for it to read.
const front = net.createServer({ noDelay: true }, (sock) => {
  sock.on('error', () => {});
  sock.once('data', (buf) => {
    sock.pause();
    sock.unshift(buf);
    if (buf.subarray(0, 3).toString() === 'PRI') {
      h2.emit('connection', sock); // the session takes what was put back, and reads on by itself
    } else {
      h1.emit('connection', sock);
      sock.resume();
    }
  });
});
front.listen(opt.port, opt.host, () => console.log(`listening on ${front.address().port}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
