// tsclient.mjs drives Tollgate with the official TypeScript SDK client
// (@modelcontextprotocol/sdk: client.experimental.tasks, and plain callTool as hosts without
// task support use it, for sync_approval hold) and prints what it observed as JSON
// lines on stdout, one object per line: {"event": NAME, ...}. The Go test reads the lines,
// answers "awaitApproval" events through the admin API, and asserts on the rest.
//
//   node tsclient.mjs <mcp-url> <scenario> [tool] [argsJSON]
//
// NODE_PATH is not honoured for ESM, so the SDK is imported by absolute path from
// TOLLGATE_SDK_DIR (the package directory under .tools/npm/node_modules).
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, scenario, toolArg, argsArg] = process.argv.slice(2);
const sdkDir = process.env.TOLLGATE_SDK_DIR;
if (!url || !scenario || !sdkDir) {
    console.error('usage: TOLLGATE_SDK_DIR=... node tsclient.mjs <url> <scenario> [tool] [argsJSON]');
    process.exit(2);
}
const sdk = (p) => import(pathToFileURL(path.join(sdkDir, 'dist', 'esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { CallToolResultSchema, ElicitRequestSchema, CreateMessageRequestSchema } = await sdk('types.js');

const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
const errFields = (e) => ({ code: e?.code, message: e?.message, data: e?.data });

// waitFor resolves when the Go side writes a line to stdin (it does so after approving).
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

// Scenario holdAsked answers the tool's questions: it declares elicitation and sampling and
// records what it was asked (elicitations accepted with {ok: true, confirm: true}, sampling with "short").
const answers = scenario === 'holdAsked';
const client = new Client({ name: 'tollgate-interop-ts', version: '1.0.0' },
    { capabilities: answers ? { elicitation: {}, sampling: {} } : {} });
const asked = [];
if (answers) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
        asked.push(req.method);
        emit('asked', { method: req.method, message: req.params.message, meta: req.params._meta });
        return { action: 'accept', content: { ok: true, confirm: true } };
    });
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
        asked.push(req.method);
        emit('asked', { method: req.method });
        return { role: 'assistant', content: { type: 'text', text: 'short' }, model: 'ts-owner' };
    });
}
const notifications = [];
client.fallbackNotificationHandler = async (n) => {
    notifications.push(n.method);
    emit('notification', { method: n.method, params: n.params });
};
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
emit('connected', {
    sessionId: transport.sessionId,
    protocolVersion: transport.protocolVersion,
    capabilities: client.getServerCapabilities(),
    serverInfo: client.getServerVersion()
});

const tasks = client.experimental.tasks;

// listAll follows nextCursor to the end (bounded) and reports the pages it saw.
async function listAll() {
    const all = [];
    const pages = [];
    let cursor;
    for (let i = 0; i < 20; i++) {
        const page = await tasks.listTasks(cursor);
        pages.push({ count: page.tasks.length, nextCursor: page.nextCursor });
        all.push(...page.tasks);
        cursor = page.nextCursor;
        if (!cursor) break;
    }
    return { tasks: all, pages };
}

// listTools also fills the SDK's cache of which tools are task tools (isToolTask).
async function listTools() {
    const res = await client.listTools();
    emit('tools', { tools: res.tools.map((t) => ({ name: t.name, execution: t.execution })) });
    return res.tools;
}

// streamCall runs callToolStream and reports every message. onCreated runs while the
// generator is paused right after taskCreated, so it sees the task before any poll.
async function streamCall(name, args, onCreated, options = {}) {
    let final;
    for await (const msg of tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, options)) {
        switch (msg.type) {
            case 'taskCreated':
                emit('taskCreated', { task: msg.task });
                if (onCreated) await onCreated(msg.task);
                break;
            case 'taskStatus':
                emit('taskStatus', { task: msg.task });
                break;
            case 'result':
                emit('result', { result: msg.result });
                final = msg;
                break;
            case 'error':
                emit('streamError', errFields(msg.error));
                final = msg;
                break;
        }
    }
    return final;
}

// approveThenContinue hands the task to the Go side and waits until it says it approved.
async function approveThenContinue(task) {
    emit('taskGet', { task: await tasks.getTask(task.taskId) });
    emit('awaitApproval', { taskId: task.taskId });
    const ack = await nextStdinLine();
    emit('approvedAck', { ack });
}

const scenarios = {
    // (a)+(b): capabilities, taskSupport, task-augmented call held for approval, result after
    // approval through getTaskResult, listTasks shows the task.
    async approve() {
        await listTools();
        const tool = toolArg || 'delete_user';
        const args = argsArg ? JSON.parse(argsArg) : { user_id: 'u-002' };
        let taskId;
        await streamCall(tool, args, async (task) => {
            taskId = task.taskId;
            emit('listWhilePending', { list: await listAll() });
            await approveThenContinue(task);
        });
        emit('taskResult', { result: await tasks.getTaskResult(taskId, CallToolResultSchema) });
        emit('taskFinal', { task: await tasks.getTask(taskId) });
        emit('list', { list: await listAll() });
    },

    // (c): cancel a held task through the SDK.
    async cancel() {
        await listTools();
        await streamCall(toolArg || 'delete_user', argsArg ? JSON.parse(argsArg) : { user_id: 'u-004' }, async (task) => {
            try {
                emit('cancelled', { task: await tasks.cancelTask(task.taskId) });
            } catch (e) {
                emit('cancelError', errFields(e));
            }
        });
        const list = await listAll();
        const last = list.tasks;
        emit('list', { list });
        try {
            await tasks.cancelTask(last[0]?.taskId ?? 'none');
            emit('cancelAgain', { ok: true });
        } catch (e) {
            emit('cancelAgainError', errFields(e));
        }
    },

    // (d): a plain call to a required tool. client.callTool refuses it locally once the SDK knows
    // the tool is required, so the raw request goes through client.request to see the server.
    async required() {
        await listTools();
        try {
            await client.callTool({ name: toolArg || 'delete_user', arguments: { user_id: 'u-009' } });
            emit('sdkGuard', { refused: false });
        } catch (e) {
            emit('sdkGuard', { refused: true, ...errFields(e) });
        }
        try {
            const r = await client.request(
                { method: 'tools/call', params: { name: toolArg || 'delete_user', arguments: { user_id: 'u-009' } } },
                CallToolResultSchema
            );
            emit('plainResult', { result: r });
        } catch (e) {
            emit('plainError', errFields(e));
        }
    },

    // (e) and server-everything: a task-augmented call the upstream itself runs (or Tollgate
    // runs for it); no approval involved.
    async task() {
        await listTools();
        const args = argsArg ? JSON.parse(argsArg) : {};
        let taskId;
        await streamCall(toolArg, args, async (task) => {
            taskId = task.taskId;
        });
        if (taskId) {
            emit('taskResult', { result: await tasks.getTaskResult(taskId, CallToolResultSchema) });
            emit('list', { list: await listAll() });
        }
    },

    // sync_approval hold, as a client without task support sees it: plain callTool with the
    // SDK's default request timeout (60 s), no task metadata. The call is held; the Go side
    // approves while it waits ("awaitApproval" without a task id); the answer is the result.
    async holdInTime() {
        await listTools();
        const progress = [];
        const call = client.callTool({ name: toolArg, arguments: JSON.parse(argsArg) }, CallToolResultSchema, {
            onprogress: (p) => {
                progress.push(p);
                emit('progress', { progress: p });
            }
        });
        emit('awaitApproval', {});
        const started = Date.now();
        emit('result', { result: await call, progressCount: progress.length, waitedMs: Date.now() - started });
    },

    // hold, decided while held, and the tool asks its user after the approval: the questions
    // arrive on the held call's own stream and are answered there (as through a direct proxy).
    async holdAsked() {
        const call = client.callTool({ name: toolArg, arguments: JSON.parse(argsArg) }, CallToolResultSchema);
        emit('awaitApproval', {});
        emit('result', { result: await call, asked });
    },

    // hold, undecided within the budget: the call settles with a tool result naming the task;
    // the Go side decides; the same call again returns the outcome (or the denial).
    async holdRetry() {
        await listTools();
        const args = JSON.parse(argsArg);
        const once = async (name) => {
            const started = Date.now();
            try {
                const r = await client.callTool({ name: toolArg, arguments: args }, CallToolResultSchema);
                emit(name, { result: r, ms: Date.now() - started });
                return r;
            } catch (e) {
                emit(name + 'Error', { ...errFields(e), ms: Date.now() - started });
                return undefined;
            }
        };
        const first = await once('settled');
        emit('awaitApproval', { taskId: first?._meta?.['io.tollgate/approval']?.taskId });
        emit('decidedAck', { ack: await nextStdinLine() });
        await once('retry');
    },

    // hold with 20 parallel retries of one call: one task (every settled answer names the same
    // one), then after the approval 20 parallel retries that all get the one execution's result.
    async holdParallel() {
        await listTools();
        const args = JSON.parse(argsArg);
        const call = () => client.callTool({ name: toolArg, arguments: args }, CallToolResultSchema);
        const settled = await Promise.allSettled(Array.from({ length: 20 }, call));
        const ids = settled.map((s) => s.value?._meta?.['io.tollgate/approval']?.taskId ?? null);
        emit('settledAll', { taskIds: ids, rejected: settled.filter((s) => s.status === 'rejected').map((s) => errFields(s.reason)) });
        emit('awaitApproval', { taskId: ids[0] });
        emit('decidedAck', { ack: await nextStdinLine() });
        const after = await Promise.allSettled(Array.from({ length: 20 }, call));
        emit('resultsAll', {
            texts: after.map((s) => (s.value?.content ?? []).map((c) => c.text ?? '').join('')),
            rejected: after.filter((s) => s.status === 'rejected').map((s) => errFields(s.reason))
        });
    },

    // A plain call with progress reporting (server-everything's long-running tool).
    async progress() {
        await listTools();
        const args = argsArg ? JSON.parse(argsArg) : {};
        const progress = [];
        const r = await client.callTool({ name: toolArg, arguments: args }, CallToolResultSchema, {
            onprogress: (p) => {
                progress.push(p);
                emit('progress', { progress: p });
            }
        });
        emit('result', { result: r, progressCount: progress.length });
    }
};

const run = scenarios[scenario];
if (!run) {
    console.error(`unknown scenario ${scenario}`);
    process.exit(2);
}
try {
    await run();
    emit('done');
} catch (e) {
    emit('fatal', { ...errFields(e), stack: e?.stack });
    process.exitCode = 1;
} finally {
    try {
        await transport.terminateSession();
    } catch {
        // best effort: the gateway may not support DELETE
    }
    await client.close();
    process.stdin.destroy();
}
