// oidc-provider.mjs runs a real OAuth 2.1 / OpenID Connect authorization server (the npm
// package oidc-provider 9.x, installed into .tools/npm by scripts/ensure-deps.sh) on loopback,
// for the caller-auth end-to-end tests (callerauth_test.go): machine clients get JWT access
// tokens (RFC 9068, typ at+jwt) for Tollgate's resource through the client_credentials grant
// with a resource indicator (RFC 8707), exactly what an MCP client's ClientCredentialsProvider
// asks for after Tollgate's 401.
//
//   node oidc-provider.mjs <port> <config.json>
//
// config.json:
//   {"resources": ["http://127.0.0.1:P/mcp"],       // Tollgate resources (audiences); the first is the default
//    "scope": "mcp:tools",                          // scopes of that resource
//    "keys": "/path/keys.json",                     // private JWK set (signing keys; the first signs)
//    "ttl": 600,                                    // access token lifetime, seconds
//    "clients": [{"client_id": "agent-a", "client_secret": "…", "groups": ["finance"]}]}
//
// The issuer is http://127.0.0.1:<port>. A client's token carries sub = its client_id (the
// client_credentials convention) and its "groups" (extraTokenClaims). The test restarts this
// process with another keys file to rotate the signing key. Prints {"event":"ready"} once
// listening; exits on SIGTERM.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [portArg, configPath] = process.argv.slice(2);
const npmDir = process.env.TOLLGATE_NPM_DIR;
if (!portArg || !configPath || !npmDir) {
    console.error('usage: TOLLGATE_NPM_DIR=... node oidc-provider.mjs <port> <config.json>');
    process.exit(2);
}
const { default: Provider, errors } = await import(pathToFileURL(path.join(npmDir, 'oidc-provider', 'lib', 'index.js')).href);

const cfg = JSON.parse(fs.readFileSync(configPath, 'utf8'));
const jwks = JSON.parse(fs.readFileSync(cfg.keys, 'utf8'));
const port = Number(portArg);
const issuer = `http://127.0.0.1:${port}`;
const groupsOf = new Map(cfg.clients.map((c) => [c.client_id, c.groups ?? []]));
const scope = cfg.scope ?? 'mcp:tools';

const provider = new Provider(issuer, {
    jwks,
    clients: cfg.clients.map((c) => ({
        client_id: c.client_id,
        client_secret: c.client_secret,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_basic',
        scope,
    })),
    scopes: scope.split(' '),
    features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        introspection: { enabled: true },
        resourceIndicators: {
            enabled: true,
            defaultResource: () => cfg.resources[0],
            useGrantedResource: () => true,
            // Tollgate gateways are the only resource servers: a token is a JWT for one of
            // them (aud = the resource indicator).
            getResourceServerInfo: (ctx, indicator) => {
                if (!cfg.resources.includes(indicator)) {
                    throw new errors.InvalidTarget(`unknown resource ${indicator}`);
                }
                return {
                    scope,
                    audience: indicator,
                    accessTokenTTL: cfg.ttl ?? 600,
                    accessTokenFormat: 'jwt',
                    jwt: { sign: { alg: 'RS256' } },
                };
            },
        },
    },
    extraTokenClaims: (ctx, token) => {
        const groups = groupsOf.get(token.clientId);
        return groups && groups.length ? { groups } : undefined;
    },
    ttl: { ClientCredentials: cfg.ttl ?? 600 },
});
provider.on('server_error', (ctx, err) => console.error('server_error', err));
provider.on('grant.error', (ctx, err) => console.error('grant.error', err?.message, err?.error_description));

const server = provider.listen(port, '127.0.0.1', () => {
    process.stdout.write(JSON.stringify({ event: 'ready', issuer, kids: jwks.keys.map((k) => k.kid) }) + '\n');
});
for (const sig of ['SIGTERM', 'SIGINT']) {
    process.on(sig, () => {
        setTimeout(() => process.exit(0), 500).unref();
        server.close(() => process.exit(0));
        server.closeAllConnections();
    });
}
