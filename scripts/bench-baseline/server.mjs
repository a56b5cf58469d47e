// The benchmark's baseline: what a user would otherwise run. A single-process MCP server over stdio,
// written with the official TypeScript SDK's low-level Server, serving the same plugin files (tools.mjs).
// scripts/bench installs the SDK next to this file in a temporary folder; nothing of it enters the tests.

import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { makeServer } from "./tools.mjs";

await makeServer().connect(new StdioServerTransport());
