import { app } from "./app.ts";
import { scheduled } from "./scheduled.ts";

export { ConversationDO } from "./turn/conversation-runner.ts";
export { QuotaDO } from "../durable-objects/quota-do.ts";
export { A2AContextDO } from "../durable-objects/a2a-context-do.ts";
export { MetricsDO } from "../durable-objects/metrics-do.ts";

export default {
  fetch: app.fetch,
  scheduled,
} satisfies ExportedHandler<Env>;
