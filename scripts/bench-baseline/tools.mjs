// What both baselines serve: the plugin files of BASELINE_ROOT, imported as ovai imports them (their three
// exports), with the same context shape, behind the official TypeScript SDK's low-level Server.

import { readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const root = process.env.BASELINE_ROOT;
const dir = path.join(root, "plugins");
const config = Object.freeze({ user: "bench", leader: "bench" });

const tools = new Map();
for (const file of readdirSync(dir).filter((f) => f.endsWith(".mjs")).sort()) {
  tools.set(file.slice(0, -4), await import(pathToFileURL(path.join(dir, file)).href));
}

/** A Server answering tools/list and tools/call for the plugins. */
export function makeServer() {
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
