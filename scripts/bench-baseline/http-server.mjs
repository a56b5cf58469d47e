// The benchmark's HTTP baseline: the same plugin files (tools.mjs) served by the official TypeScript SDK's own
// Streamable HTTP server (sessions, as its examples make them), on node:http. It prints the port it
// listens on, then serves until killed. scripts/bench installs the SDK next to it.

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { makeServer } from "./tools.mjs";

const transports = new Map();

const http = createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  const parsed = body ? JSON.parse(body) : undefined;
  const id = req.headers["mcp-session-id"];
  let transport = id ? transports.get(id) : undefined;
  if (!transport) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sid) => transports.set(sid, transport),
    });
    await makeServer().connect(transport);
  }
  await transport.handleRequest(req, res, parsed);
});

http.listen(0, "127.0.0.1", () => console.log(http.address().port));
