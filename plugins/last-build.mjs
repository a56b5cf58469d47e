// What is on CI for a branch: the README's example, with the CI address taken from openovai.json
// ("ci": {"url": "https://ci.example.com"}) instead of written into the file.

export const description =
  "The last build of a branch on CI: its state and where its log is. Read-only: it starts " +
  "nothing and cancels nothing. Refuses a branch name that is not a plain ref.";

export const inputSchema = {
  type: "object",
  properties: {
    branch: { type: "string", description: "The branch, as git names it: main, feature/login." },
  },
  required: ["branch"],
  additionalProperties: false,
};

export async function run({ branch }, { seat, config, signal }) {
  const CI = config.ci?.url;
  if (typeof CI !== "string" || CI === "") {
    return { refused: 'no CI is set for this instance: add "ci": {"url": "https://ci.example.com"} to openovai.json and run ovai restart' };
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9._/-]*$/.test(branch)) {
    return { refused: `${branch} is not a branch name this tool asks CI about` };
  }
  let response;
  try {
    response = await fetch(`${CI}/api/builds?branch=${encodeURIComponent(branch)}&limit=1`, { signal });
  } catch (err) {
    return { refused: `CI at ${CI} could not be reached: ${err.cause?.code ?? err.message}` };
  }
  if (!response.ok) {
    return { refused: `CI answered ${response.status} for ${branch}` };
  }
  const [build] = await response.json();
  if (build === undefined) {
    return { text: `no build of ${branch} on CI yet` };
  }
  return { text: `${branch}: ${build.state}, build #${build.number}, log at ${build.url} (asked by ${seat})` };
}
