// One chat call with Node's global fetch (Node >= 20.18.1; undici 7 needs it): node chat.mjs "Say hi"
// npm install undici   — then eval "$(semula env)" gives HTTPS_PROXY and NODE_EXTRA_CA_CERTS.
// WITHOUT the dispatcher below, Node 20's fetch ignores HTTPS_PROXY and calls the REAL host.
import { EnvHttpProxyAgent, setGlobalDispatcher } from "undici";

setGlobalDispatcher(new EnvHttpProxyAgent()); // reads HTTPS_PROXY / NO_PROXY; once, at start-up

const res = await fetch("https://api.openai.com/v1/chat/completions", {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
  body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: process.argv[2] ?? "Say hi" }] }),
});
console.error(`status ${res.status} · x-semula-decision: ${res.headers.get("x-semula-decision") ?? "(none: semula not in the path)"}`);
console.log(await res.text());
