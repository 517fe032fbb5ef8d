// replay.mjs drives Tollgate's "replay only until delivered" rule (docs/contract.md §3) with an
// official TypeScript SDK client used as hosts without task support use it: plain callTool,
// the SDK's default request timeout. It prints JSON lines on stdout ({"event": NAME, ...}) like
// tsclient.mjs; at each "await" event it waits for one line on stdin (the Go test decides the
// approval, or waits until Tollgate recorded a delivery, first).
//
//   node replay.mjs <mcp-url> <sdk1|sdk2> <approve|reject> <tool> <argsJSON>
//
// sdk1: @modelcontextprotocol/sdk 1.x, which speaks 2025-11-25 (and earlier) only;
// sdk2: @modelcontextprotocol/client 2.x pinned to 2026-07-28, the era 1.x does not speak. It
// sends an Authorization credential: an anonymous 2026-07-28 caller's retry never attaches to
// the task its first call made (each of its tasks is its own owner).
//
// approve: call (settles undecided) → approved → the same call (the one result) → delivered →
// the same call (a new approval) → approved → the same call (a second execution's result).
// reject: call → rejected → the same call (told the rejection) → delivered → the same call
// (a new approval, which the Go side inspects and rejects).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, sdkName, scenario, tool, argsJSON] = process.argv.slice(2);
const sdkDir = process.env.TOLLGATE_SDK_DIR;
const npmDir = process.env.TOLLGATE_NPM_DIR;
if (!url || !['sdk1', 'sdk2'].includes(sdkName) || !['approve', 'reject'].includes(scenario) || !tool || !sdkDir || !npmDir) {
    console.error('usage: TOLLGATE_SDK_DIR=... TOLLGATE_NPM_DIR=... node replay.mjs <url> <sdk1|sdk2> <approve|reject> <tool> <argsJSON>');
    process.exit(2);
}
const imp = (p) => import(pathToFileURL(p).href);

const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const errFields = (e) => ({ code: e?.code, message: e?.message, data: e?.data });

const stdinLines = [];
let stdinWaiter = null;
let stdinBuf = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
    stdinBuf += chunk;
    let i;
    while ((i = stdinBuf.indexOf('\n')) >= 0) {
        stdinLines.push(stdinBuf.slice(0, i));
        stdinBuf = stdinBuf.slice(i + 1);
    }
    if (stdinWaiter && stdinLines.length) {
        const w = stdinWaiter;
        stdinWaiter = null;
        w(stdinLines.shift());
    }
});
const nextStdinLine = () =>
    stdinLines.length ? Promise.resolve(stdinLines.shift()) : new Promise((r) => (stdinWaiter = r));

// await hands a step to the Go side and waits for its answer.
const wait = async (step, taskId) => {
    emit('await', { step, taskId });
    emit('ack', { step, ack: await nextStdinLine() });
};

let client;
let transport;
const info = { name: 'tollgate-interop-replay', version: '1.0.0' };
if (sdkName === 'sdk1') {
    const dist = (p) => imp(path.join(sdkDir, 'dist', 'esm', p));
    const { Client } = await dist('client/index.js');
    const { StreamableHTTPClientTransport } = await dist('client/streamableHttp.js');
    client = new Client(info, { capabilities: {} });
    transport = new StreamableHTTPClientTransport(new URL(url));
} else {
    const { Client, StreamableHTTPClientTransport } = await imp(path.join(npmDir, '@modelcontextprotocol/client/dist/index.mjs'));
    client = new Client(info, { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } });
    transport = new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: 'Bearer interop-replay-holder' } }
    });
}
await client.connect(transport);
emit('connected', { protocolVersion: transport.protocolVersion });

const args = JSON.parse(argsJSON);
// once makes the plain call and reports its result or the JSON-RPC error it ended with.
const once = async (name) => {
    try {
        const r = await client.callTool({ name: tool, arguments: args });
        emit(name, { result: r, taskId: r?._meta?.['io.tollgate/approval']?.taskId });
        return r;
    } catch (e) {
        emit(name + 'Error', errFields(e));
        return undefined;
    }
};

try {
    const first = await once('settled');
    const firstId = first?._meta?.['io.tollgate/approval']?.taskId;
    await wait(scenario, firstId);
    await once('retry');
    await wait('delivered', firstId);
    const again = await once('again');
    const againId = again?._meta?.['io.tollgate/approval']?.taskId;
    await wait(scenario === 'approve' ? 'approve' : 'inspect', againId);
    if (scenario === 'approve') {
        await once('againRetry');
    }
    emit('done');
} catch (e) {
    emit('fatal', { ...errFields(e), stack: e?.stack });
    process.exitCode = 1;
} finally {
    if (sdkName === 'sdk1') {
        try {
            await transport.terminateSession();
        } catch {
            // best effort
        }
    }
    await client.close();
    process.stdin.destroy();
}
