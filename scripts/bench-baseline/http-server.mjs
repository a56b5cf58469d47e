// The benchmark's HTTP baseline: the same plugin files served by the official TypeScript SDK's own
// Streamable HTTP server (sessions, as its examples make them), on node:http. It prints the port it
// listens on, then serves until killed. scripts/bench installs the SDK next to it.

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const root = process.env.BASELINE_ROOT;
const dir = path.join(root, "plugins");
const config = Object.freeze({ user: "bench", leader: "bench" });

const tools = new Map();
for (const file of readdirSync(dir).filter((f) => f.endsWith(".mjs")).sort()) {
  tools.set(file.slice(0, -4), await import(pathToFileURL(path.join(dir, file)).href));
}

function makeServer() {
  const server = new Server({ name: "baseline", version: "1.0.0" }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [...tools].map(([name, ns]) => ({ name, description: ns.description, inputSchema: ns.inputSchema })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = tools.get(request.params.name);
    if (tool === undefined) throw new Error(`no tool ${request.params.name}`);
    try {
      const answer = await tool.run(request.params.arguments ?? {}, { seat: "bench", role: "Leader", root, config, signal: extra.signal });
      if (typeof answer?.text === "string") return { content: [{ type: "text", text: answer.text }] };
      return { content: [{ type: "text", text: String(answer?.refused) }], isError: true };
    } catch (err) {
      return { content: [{ type: "text", text: String(err) }], isError: true };
    }
  });
  return server;
}

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
