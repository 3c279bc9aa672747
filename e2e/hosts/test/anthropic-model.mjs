// A scripted stand-in for the Anthropic Messages API on loopback: the tests own it, so Claude
// Code runs with no real model and no network. Each reply is chosen by `script(request)` and
// streamed as the API's server-sent events; every request is kept for the test to inspect.
import { createServer } from 'node:http';

/** A text reply. */
export const text = (t) => ({ type: 'text', text: t });
/** A tool call. */
export const toolUse = (name, input, id = `toolu_${Math.random().toString(36).slice(2, 10)}`) => ({ type: 'tool_use', id, name, input });

function events(blocks, model) {
  const out = [];
  const send = (type, data) => out.push(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  send('message_start', {
    message: {
      id: `msg_${Date.now()}`, type: 'message', role: 'assistant', model, content: [],
      stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
    },
  });
  blocks.forEach((block, index) => {
    if (block.type === 'text') {
      send('content_block_start', { index, content_block: { type: 'text', text: '' } });
      send('content_block_delta', { index, delta: { type: 'text_delta', text: block.text } });
    } else {
      send('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } });
    }
    send('content_block_stop', { index });
  });
  const stop = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  send('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 1 } });
  send('message_stop', {});
  return out.join('');
}

/** Starts the endpoint; `script(body)` returns the content blocks of each reply. */
export async function startModel(script) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      const body = raw ? JSON.parse(raw) : {};
      if (req.url.startsWith('/v1/messages/count_tokens')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ input_tokens: 1 }));
      }
      if (!req.url.startsWith('/v1/messages')) {
        res.writeHead(404);
        return res.end();
      }
      requests.push(body);
      const blocks = script(body) ?? [text('ok')];
      if (body.stream) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return res.end(events(blocks, body.model));
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        id: `msg_${Date.now()}`, type: 'message', role: 'assistant', model: body.model, content: blocks,
        stop_reason: blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
        stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 },
      }));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    stop: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/** The tool results in a request's last user message, as text. */
export function toolResults(body) {
  const last = body.messages?.at(-1);
  if (last?.role !== 'user' || !Array.isArray(last.content)) return [];
  return last.content
    .filter((c) => c.type === 'tool_result')
    .map((c) => (typeof c.content === 'string' ? c.content : JSON.stringify(c.content)));
}
