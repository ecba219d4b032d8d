// The cron trigger (wrangler.toml [triggers], every minute) runs the spec's background work: quota
// period resets and the data export (each decides for itself whether it is due); approval expiry
// joins here when it exists. One job failing does not keep the others from running; the
// invocation still fails afterwards, so the failure shows where cron invocations are watched.
import { runDataExport } from "./data/export.ts";
import { refreshDueQuotas } from "./quota/quotas.ts";
import { loadRuntime } from "./runtime.ts";
import { openStore } from "./storage/open-store.ts";
import { log } from "./log.ts";

export async function scheduled(controller: ScheduledController, env: Env, _ctx: ExecutionContext): Promise<void> {
  const loaded = await loadRuntime(env);
  if (!loaded.ok) return;
  const { config } = loaded.runtime;
  const store = openStore(env, config.database);
  const failures: unknown[] = [];
  const job = async (name: string, work: () => Promise<void>) => {
    try {
      await work();
    } catch (error) {
      log.error(`${name}: run failed`, error);
      failures.push(error);
    }
  };
  try {
    await job("quota scheduler", async () => {
      const refreshed = await refreshDueQuotas(env, config, store);
      if (refreshed > 0) log.info(`quota scheduler: ${refreshed} counter(s) brought to their new period`);
    });
    await job("data export", async () => {
      await runDataExport({ bucket: env.DATA, store }, config.user_data_collection, new Date(controller.scheduledTime));
    });
  } finally {
    await store.close();
  }
  if (failures.length > 0) throw failures[0];
}
