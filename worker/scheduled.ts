// The cron trigger (wrangler.toml [triggers]) runs the spec's background work: quota period resets
// now; data export and approval expiry join here when they exist.
import { refreshDueQuotas } from "./quota/quotas.ts";
import { loadRuntime } from "./runtime.ts";
import { openStore } from "./storage/store.ts";

export async function scheduled(_controller: ScheduledController, env: Env, _ctx: ExecutionContext): Promise<void> {
  const loaded = await loadRuntime(env);
  if (!loaded.ok) return;
  const { config } = loaded.runtime;
  const store = openStore(env, config.database);
  try {
    const refreshed = await refreshDueQuotas(env, config, store);
    if (refreshed > 0) console.log(`quota scheduler: ${refreshed} counter(s) brought to their new period`);
  } finally {
    await store.close();
  }
}
