import { Hono } from "hono";
const app = new Hono<{ Bindings: Env }>();
app.get("/liveness", async (c) => {
  const res = await c.env.CONFIG_FILES.fetch("http://config/parley.yaml");
  return c.json({ alive: true, cfg: await res.text() });
});
export default app;
export { DurableObject as ConversationDO, DurableObject as QuotaDO, DurableObject as A2AContextDO } from "cloudflare:workers";
