// exttasks.mjs drives an MCP server with the official tasks requester
// (@modelcontextprotocol/ext-tasks, on @modelcontextprotocol/client 2.x) in either protocol era
// and prints what it observed as JSON lines on stdout ({"event": NAME, ...}), like tsclient.mjs.
//
//   node exttasks.mjs <mcp-url> <legacy|modern> <tool> <argsJSON> [task preference]
//
// The optional task preference (allow, prefer, require, forbid) is ext-tasks' TaskOptions
// preference; on a 2025-11-25 server "prefer" sends the task parameter for an optional tool.
//
// legacy: the client's default initialize handshake (2025-11-25 tasks, v1 wire);
// modern: the client pinned to 2026-07-28 (server/discover, stateless requests); ext-tasks then
// needs the host's raw request path for task traffic (SEP-2663 shapes the SDK codecs reject),
// which this script implements with fetch: the request framed by ext-tasks, sent with the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers 2026-07-28 requires.
//
// When the call becomes a task the script prints "taskCreated", then waits for one line on stdin
// (the Go test approves the task through Tollgate's admin API first when it is held), then
// settles the execution, printing every "task" update and the "outcome". Elicitations are
// answered with accept {confirm: true, name: "interop"}.
//
// Packages are imported by absolute path from TOLLGATE_NPM_DIR (.tools/npm/node_modules).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, era, tool, argsJSON, preference] = process.argv.slice(2);
const npmDir = process.env.TOLLGATE_NPM_DIR;
if (!url || !['legacy', 'modern'].includes(era) || !tool || !npmDir) {
    console.error('usage: TOLLGATE_NPM_DIR=... node exttasks.mjs <url> <legacy|modern> <tool> <argsJSON>');
    process.exit(2);
}
const mod = (p) => import(pathToFileURL(path.join(npmDir, p)).href);
const { Client, StreamableHTTPClientTransport } = await mod('@modelcontextprotocol/client/dist/index.mjs');
const { createTaskSessionFromClient, resultFromTaskOutcome } = await mod('@modelcontextprotocol/ext-tasks/dist/client/index.js');

const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const errFields = (e) => ({ name: e?.name, code: e?.code, message: e?.message, data: e?.data });

const stdinLine = () =>
    new Promise((resolve) => {
        let buf = '';
        process.stdin.setEncoding('utf8');
        const onData = (chunk) => {
            buf += chunk;
            const i = buf.indexOf('\n');
            if (i >= 0) {
                process.stdin.off('data', onData);
                process.stdin.pause();
                resolve(buf.slice(0, i));
            }
        };
        process.stdin.on('data', onData);
    });

const clientInfo = { name: 'tollgate-interop-ext-tasks', version: '1.0.0' };
const capabilities = { elicitation: {} };
const client = new Client(clientInfo, {
    capabilities,
    ...(era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}),
});
client.setRequestHandler?.('elicitation/create', async () => ({ action: 'accept', content: { confirm: true, name: 'interop' } }));

let nextId = 1;
// rawDispatch posts one framed request the way 2026-07-28 wants it over HTTP and returns the
// JSON-RPC outcome ({kind: result|error}) ext-tasks expects.
async function rawDispatch(request, options = {}) {
    const id = `ext-${nextId++}`;
    const body = { jsonrpc: '2.0', id, method: request.method, params: request.params ?? {} };
    const headers = {
        'Content-Type': 'application/json',
        Accept: 'application/json, text/event-stream',
        'MCP-Protocol-Version': '2026-07-28',
        'Mcp-Method': request.method,
    };
    const name = request.method === 'tools/call' ? body.params.name : body.params.taskId;
    if (typeof name === 'string') headers['Mcp-Name'] = name;
    const resp = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: options.signal });
    const text = await resp.text();
    let msg;
    if ((resp.headers.get('content-type') ?? '').includes('text/event-stream')) {
        for (const line of text.split(/\r?\n/)) {
            if (!line.startsWith('data:')) continue;
            try {
                const m = JSON.parse(line.slice(5));
                if (m.id === id) msg = m;
            } catch {}
        }
    } else {
        try {
            msg = JSON.parse(text);
        } catch {}
    }
    emit('wire', { method: request.method, status: resp.status, response: msg ?? text });
    if (msg?.error) return { kind: 'error', error: msg.error };
    if (msg && 'result' in msg) return { kind: 'result', result: msg.result };
    throw new Error(`HTTP ${resp.status}: no JSON-RPC response for ${request.method}: ${text.slice(0, 300)}`);
}

try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    emit('connected', { era: client.getProtocolEra(), capabilities: client.getServerCapabilities() });

    const session = createTaskSessionFromClient(client, {
        endpointId: 'tollgate-interop',
        onInputRequest: async (req) => {
            emit('inputRequest', { kind: req.kind, params: req.params });
            if (req.kind === 'elicitation') return { action: 'accept', content: { confirm: true, name: 'interop' } };
            throw new Error(`unexpected input request ${req.kind}`);
        },
        ...(era === 'modern'
            ? { rawDispatch, v2RequestFraming: { protocolVersion: '2026-07-28', clientInfo, clientCapabilities: capabilities } }
            : {}),
    });
    try {
        const execution = await session.callTool(tool, JSON.parse(argsJSON || '{}'), preference ? { task: { preference } } : {});
        emit('execution', { kind: execution.kind, taskId: execution.handle?.taskId });
        if (execution.kind === 'task') {
            emit('taskCreated', { taskId: execution.handle.taskId });
            emit('reply', { line: await stdinLine() });
        }
        const { outcome, lastTask } = await execution.settle({
            onEvent: (ev) => {
                if (ev.type === 'task') emit('task', { status: ev.task.status, statusMessage: ev.task.statusMessage, taskId: ev.task.taskId });
            },
        });
        emit('outcome', {
            status: outcome.status,
            result: outcome.status === 'completed' ? resultFromTaskOutcome(outcome) : undefined,
            error: outcome.status === 'failed' ? errFields(outcome.error) : undefined,
            lastStatus: lastTask?.status,
        });
    } catch (e) {
        emit('callError', errFields(e));
    } finally {
        await session.close();
    }
} catch (e) {
    emit('connectError', errFields(e));
}
await client.close().catch(() => {});
emit('done');
process.exit(0);
