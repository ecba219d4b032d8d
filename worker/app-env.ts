import type { AuthContext } from "./auth/types.ts";
import type { Runtime } from "./runtime.ts";
import type { Store } from "./storage/store.ts";

/** Hono environment of every route: the Worker's bindings and what middleware sets on the context. */
export interface AppEnv {
  Bindings: Env;
  Variables: { rt: Runtime; auth: AuthContext; store: Store };
}
