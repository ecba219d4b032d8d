// Bindings that are secrets (never in wrangler.toml), so `wrangler types` cannot see them.
declare namespace Cloudflare {
  interface Env {
    /** The whole configuration document (YAML or JSON); overrides the bundled config/parley.yaml. */
    PARLEY_CONFIG?: string;
    [name: string]: unknown;
  }
}
