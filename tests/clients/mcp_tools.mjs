// The TypeScript SDK's MCP client (@modelcontextprotocol/sdk) through semula: node mcp_tools.mjs URL [miss]
// npm install @modelcontextprotocol/sdk undici — `semula exec` gives HTTPS_PROXY and NODE_EXTRA_CA_CERTS;
// Node 20's fetch (which the SDK's Streamable HTTP transport uses) needs undici's dispatcher to honour them.
// Prints one line: RESULT {"tools": [...], "results": [...], "session": "...", "miss": "..."}.
import { EnvHttpProxyAgent, setGlobalDispatcher } from "undici";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

setGlobalDispatcher(new EnvHttpProxyAgent());
const client = new Client({ name: "semula-ts-test", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(process.argv[2]));
await client.connect(transport);
const out = { tools: (await client.listTools()).tools.map((t) => t.name).sort(), results: [] };
for (const args of [{ a: 1, b: 2 }, { a: 1, b: 2 }, { a: 5, b: 7 }]) {
  out.results.push((await client.callTool({ name: "add", arguments: args })).content);
}
out.session = transport.sessionId ?? null;
if (process.argv[3] === "miss") {
  try {
    await client.callTool({ name: "add", arguments: { a: 9, b: 9 } });
  } catch (e) {
    out.miss = String(e.message ?? e);
  }
}
await transport.terminateSession();
await client.close();
console.log("RESULT " + JSON.stringify(out));
