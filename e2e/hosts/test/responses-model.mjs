// A scripted stand-in for the OpenAI Responses API on loopback, the Codex counterpart of
// anthropic-model.mjs: Codex runs with no real model and no network. Each reply is chosen by
// `script(request, headers)` and streamed as the API's server-sent events; every request is kept,
// with its headers, for the test to inspect.
import { createServer } from 'node:http';

let lastId = 0;
const nextId = (prefix) => `${prefix}_${++lastId}`;

/** An assistant message. */
export const message = (text) => ({
  type: 'message', role: 'assistant', id: nextId('msg'), content: [{ type: 'output_text', text }],
});

/**
 * A function call. Codex offers some tools inside a namespace (`multi_agent_v1` holds
 * `spawn_agent` and `wait_agent`); the call names it the way the API does, in `namespace`.
 */
export const functionCall = (name, args, namespace) => ({
  type: 'function_call', id: nextId('fc'), call_id: nextId('call'), name,
  ...(namespace ? { namespace } : {}), arguments: JSON.stringify(args),
});

function events(items) {
  const id = nextId('resp');
  const send = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  return send('response.created', { response: { id } })
    + items.map((item) => send('response.output_item.done', { item })).join('')
    + send('response.completed', {
      response: {
        id,
        usage: { input_tokens: 1, input_tokens_details: null, output_tokens: 1, output_tokens_details: null, total_tokens: 2 },
      },
    });
}

/** Starts the endpoint; `script(body, headers)` returns the output items of each reply. */
export async function startModel(script) {
  const requests = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => { raw += c; });
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.startsWith('/v1/responses')) {
        res.writeHead(404);
        return res.end();
      }
      const body = raw ? JSON.parse(raw) : {};
      requests.push({ body, headers: req.headers });
      let items;
      try {
        items = script(body, req.headers) ?? [message('ok')];
      } catch (e) {
        items = [message(`script error: ${e.message}`)];
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(events(items));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1`,
    requests,
    stop: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/** Codex's own account of a request's turn (`x-codex-turn-metadata`): thread, parent, sandbox mode. */
export function turnMetadata(headers) {
  try {
    return JSON.parse(headers['x-codex-turn-metadata'] ?? '{}');
  } catch {
    return {};
  }
}

/**
 * Whether a request is a spawned subagent's: Codex marks those with `x-openai-subagent`
 * (`collab_spawn`) and `x-codex-parent-thread-id`. Its `agent_name` stays `/root`, so that
 * does not tell them apart.
 */
export const isSubagent = (headers) => headers['x-openai-subagent'] !== undefined;

/** The `function_call_output` items of a request's input, keyed by call id, as text. */
export function functionOutputs(body) {
  const out = new Map();
  for (const item of body.input ?? []) {
    if (item.type !== 'function_call_output') continue;
    const { output } = item;
    out.set(item.call_id, typeof output === 'string' ? output : JSON.stringify(output));
  }
  return out;
}

/** All the text of a request's developer messages. */
export function developerText(body) {
  return (body.input ?? [])
    .filter((item) => item.type === 'message' && item.role === 'developer')
    .flatMap((item) => (Array.isArray(item.content) ? item.content : [{ text: item.content }]))
    .map((c) => c.text ?? '')
    .join('\n');
}
