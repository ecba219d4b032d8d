/**
 * CLI for the scripted inference backend (see scripted-backend.ts for its behaviour):
 *   node test/fakes/scripted-backend-main.ts [--port 8321] [--host 127.0.0.1]
 *     [--first-token-delay MS] [--token-delay MS] [--no-seed] [--model-style llama-stack|openai]
 *     [--chat-only] [--reject-stream-options] [--omit-usage] [--record N]
 * It keeps the latest 1000 requests for GET /__requests (--record sets how many).
 */
import { parseArgs } from "node:util";
import { startScriptedBackend } from "./scripted-backend.ts";

function fail(message: string): never {
  console.error(`scripted-backend: ${message}`);
  process.exit(2);
}

function nonNegativeInteger(name: string, value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0) fail(`--${name} must be a non-negative integer, got "${value}"`);
  return number;
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      port: { type: "string", default: "8321" },
      host: { type: "string", default: "127.0.0.1" },
      "first-token-delay": { type: "string", default: "0" },
      "token-delay": { type: "string", default: "0" },
      "no-seed": { type: "boolean", default: false },
      "model-style": { type: "string", default: "llama-stack" },
      "chat-only": { type: "boolean", default: false },
      "reject-stream-options": { type: "boolean", default: false },
      "omit-usage": { type: "boolean", default: false },
      record: { type: "string", default: "1000" },
    },
  }));
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}

const options = {
  port: nonNegativeInteger("port", values.port),
  host: values.host,
  firstTokenDelayMs: nonNegativeInteger("first-token-delay", values["first-token-delay"]),
  tokenDelayMs: nonNegativeInteger("token-delay", values["token-delay"]),
  seed: !values["no-seed"],
  modelStyle: values["model-style"] === "openai" ? ("openai" as const) : values["model-style"] === "llama-stack" ? ("llama-stack" as const) : fail(`--model-style must be llama-stack or openai`),
  chatOnly: values["chat-only"],
  rejectStreamOptions: values["reject-stream-options"],
  omitUsage: values["omit-usage"],
  recordLimit: nonNegativeInteger("record", values.record),
};
// A taken port is the usual failure: one line is more useful than a stack trace.
const backend = await startScriptedBackend(options).catch((error: unknown) =>
  fail(`cannot listen on ${options.host}:${options.port}: ${error instanceof Error ? error.message : String(error)}`),
);
console.log(`scripted backend listening on ${backend.url}`);

let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  await backend.close();
  console.log(`scripted backend stopped (${signal})`);
  process.exit(0);
}
process.on("SIGINT", () => void stop("SIGINT"));
process.on("SIGTERM", () => void stop("SIGTERM"));
