// A Leader's tool: declares or lifts a code freeze, kept in plugins/freeze/FREEZE, where every session
// (and a git hook, if you like) can read it. A plugin keeps what it writes in a folder of the instance:
// the root's own entries are read-only in the plugin host's box. Workers are refused in the tool's own
// words.

import { writeFile, rm, readFile, mkdir } from "node:fs/promises";
import path from "node:path";

export const description =
  "Declares a code freeze (with a reason every seat can read) or lifts it; the Leader's alone. " +
  "Called without arguments, it says whether the code is frozen and why, to anybody.";

export const inputSchema = {
  type: "object",
  properties: {
    reason: { type: "string", minLength: 1, description: "Why the code is frozen; every seat reads this." },
    lift: { type: "boolean", description: "true to lift the freeze instead of declaring one." },
  },
  additionalProperties: false,
};

export async function run({ reason, lift }, { seat, role, root, config }) {
  const folder = path.join(root, "plugins", "freeze");
  const file = path.join(folder, "FREEZE");
  if (reason === undefined && lift === undefined) {
    const current = await readFile(file, "utf8").catch(() => null);
    return { text: current === null ? "the code is not frozen" : `the code is frozen: ${current.trim()}` };
  }
  if (role !== "Leader") {
    return { refused: `only the Leader (${config.leader}) declares or lifts a freeze; you are ${seat}, a Worker` };
  }
  if (lift) {
    await rm(file, { force: true });
    return { text: "the freeze is lifted" };
  }
  if (reason === undefined) {
    return { refused: "give a reason to declare a freeze, or lift: true to lift one" };
  }
  await mkdir(folder, { recursive: true });
  await writeFile(file, `${reason} (declared by ${seat}, ${new Date().toISOString()})\n`);
  return { text: `the code is frozen: ${reason}` };
}
