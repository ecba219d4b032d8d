// Settings that load but that this release does not act on. An operator bringing a configuration
// written for the original system is told, once per isolate that loads it, which of its settings do
// nothing here, rather than finding out by surprise. Entries leave this list as features land.
import type { Config } from "./schema.ts";

const CHECKS: Array<[name: string, present: (config: Config) => boolean]> = [
  // Workers' fetch always verifies TLS against the public roots.
  ["splunk.verify_ssl", (config) => config.splunk.enabled && !config.splunk.verify_ssl],
  ["inference_backend.use_as_library_client", (config) => config.inference_backend.use_as_library_client],
  ["conversation_cache", (config) => config.conversation_cache !== undefined],
  ["a2a_state", (config) => config.a2a_state !== undefined],
  ["azure_entra_id", (config) => config.azure_entra_id !== undefined],
  ["skills.paths", (config) => config.skills.paths.length > 0],
  ["service.tls_config", (config) => Object.values(config.service.tls_config).some((value) => value !== undefined)],
  ["service.workers", (config) => config.service.workers !== 1],
  ["service.root_path", (config) => config.service.root_path !== ""],
  ["authentication.skip_tls_verification", (config) => config.authentication.skip_tls_verification],
  ["authentication.k8s_ca_cert_path", (config) => config.authentication.k8s_ca_cert_path !== undefined],
];

/** The settings of `config` that have no effect in this release, by dotted name. */
export function inertSettings(config: Config): string[] {
  return CHECKS.filter(([, present]) => present(config)).map(([name]) => name);
}
