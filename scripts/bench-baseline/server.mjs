// The benchmark's baseline: what a user would otherwise run. A single-process MCP server over stdio,
// written with the official TypeScript SDK's low-level Server, serving the same plugin files, imported
// the same way (their three exports), with the same context shape. scripts/bench installs the SDK next
// to this file in a temporary folder; nothing of it enters the tests.

import { readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const root = process.env.BASELINE_ROOT;
const dir = path.join(root, "plugins");
const config = Object.freeze({ user: "bench", leader: "bench" });

const tools = new Map();
for (const file of readdirSync(dir).filter((f) => f.endsWith(".mjs")).sort()) {
  const ns = await import(pathToFileURL(path.join(dir, file)).href);
  tools.set(file.slice(0, -4), ns);
}

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

await server.connect(new StdioServerTransport());
