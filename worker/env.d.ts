// Bindings that are secrets (never in wrangler.toml), so `wrangler types` cannot see them, and the
// index signature through which `${env.NAME}` references in the configuration are resolved.
interface Env {
  /** The whole configuration document (YAML or JSON); overrides the bundled config/parley.yaml. */
  PARLEY_CONFIG?: string;
  [name: string]: unknown;
}
