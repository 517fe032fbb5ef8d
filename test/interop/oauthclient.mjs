// oauthclient.mjs connects to Tollgate as a machine client that has no token to begin with,
// the way the MCP authorization spec describes: the first request gets 401 with
// WWW-Authenticate naming the protected resource metadata (RFC 9728); the client reads it,
// discovers the authorization server (RFC 8414 / OpenID Connect discovery), gets an access
// token with the client_credentials grant and a resource indicator (RFC 8707), and retries.
// All of that is the SDK's own ClientCredentialsProvider; this script only supplies the client
// id and secret and logs every HTTP exchange the SDK makes (method, URL, status, whether it
// carried a bearer token — never the token).
//
//   node oauthclient.mjs <mcp-url> <legacy|modern> <client_id> <client_secret> <issuer> <tool> <argsJSON> [scope]
//
// scope is the provider's configured scope option. SDK 1.32's client_credentials token
// request sends only that (not the scope of the 401 challenge or of scopes_supported), so a
// 1.32 client must be configured with the scope Tollgate requires; the 2.x client takes the
// challenge's scope by itself and is run without one.
//
// legacy: @modelcontextprotocol/sdk 1.32 (2025-11-25; its newest revision), ClientCredentialsProvider
//         from client/auth-extensions.js;
// modern: @modelcontextprotocol/client 2.x pinned to 2026-07-28 (SDK 1.32 does not speak it),
//         its ClientCredentialsProvider.
// Prints JSON lines: "http" per exchange, "connected", "tools", "result" or "callError", "done".
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, era, clientId, clientSecret, issuer, tool, argsJSON, scope] = process.argv.slice(2);
const npmDir = process.env.TOLLGATE_NPM_DIR;
if (!url || !['legacy', 'modern'].includes(era) || !clientId || !clientSecret || !issuer || !tool || !npmDir) {
    console.error('usage: TOLLGATE_NPM_DIR=... node oauthclient.mjs <url> <legacy|modern> <client_id> <client_secret> <issuer> <tool> <argsJSON>');
    process.exit(2);
}
const mod = (p) => import(pathToFileURL(path.join(npmDir, p)).href);
const emit = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');

let Client, StreamableHTTPClientTransport, ClientCredentialsProvider;
if (era === 'legacy') {
    const sdk = (p) => mod(path.join('@modelcontextprotocol/sdk/dist/esm', p));
    ({ Client } = await sdk('client/index.js'));
    ({ StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js'));
    ({ ClientCredentialsProvider } = await sdk('client/auth-extensions.js'));
} else {
    ({ Client, StreamableHTTPClientTransport, ClientCredentialsProvider } = await mod('@modelcontextprotocol/client/dist/index.mjs'));
}

// loggingFetch records each exchange; the SDK uses it for the MCP requests and for discovery
// and the token request alike.
const loggingFetch = async (input, init = {}) => {
    const req = new Request(input, init);
    const resp = await fetch(req);
    const u = new URL(req.url);
    emit('http', {
        method: req.method,
        origin: u.origin,
        path: u.pathname,
        status: resp.status,
        bearer: (req.headers.get('authorization') ?? '').toLowerCase().startsWith('bearer '),
        wwwAuthenticate: resp.headers.get('www-authenticate') ?? undefined,
    });
    return resp;
};

const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, expectedIssuer: issuer, ...(scope ? { scope } : {}) });
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider, fetch: loggingFetch });
const client = new Client({ name: 'tollgate-interop-oauth', version: '1.0.0' },
    { capabilities: {}, ...(era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {}) });
try {
    await client.connect(transport);
    emit('connected', { protocolVersion: transport.protocolVersion ?? client.getNegotiatedProtocolVersion?.() });
    const { tools } = await client.listTools();
    emit('tools', { names: tools.map((t) => t.name) });
    try {
        const result = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON ?? '{}') });
        emit('result', { result });
    } catch (e) {
        emit('callError', { code: e?.code, message: e?.message });
    }
    await client.close();
} catch (e) {
    emit('error', { name: e?.name, code: e?.code, message: e?.message });
    process.exit(1);
}
emit('done');
process.exit(0);
