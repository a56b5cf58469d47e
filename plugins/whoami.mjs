// Shows what the server tells a tool about its caller. The seat comes from the secret the session's
// process presented, never from anything the session says, so this is also how to check who you are.

export const description =
  "Who is calling, as the server knows it: your seat, your role (Leader or Worker), where the " +
  "instance lives, and its User and Leader. Read-only; takes no arguments.";

export const inputSchema = { type: "object", properties: {}, additionalProperties: false };

export function run(_args, { seat, role, root, config }) {
  return {
    text: `You are ${seat}, a ${role}, in the instance at ${root}. ` +
      `The User is ${config.user} and the Leader is ${config.leader}.`,
  };
}
