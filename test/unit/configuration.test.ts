// Loading a configuration with the files it names (worker/configuration.ts), the code the Worker and
// `npm run deploy` share, against a stand-in for the bundled config/ folder.
import { describe, expect, it } from "vitest";
import type { BundledFiles } from "../../worker/config/files.ts";
import { loadConfiguration, type LoadResult } from "../../worker/configuration.ts";

const MINIMAL = "inference_backend:\n  url: http://127.0.0.1:8321/v1\n";

const folder =
  (files: Record<string, string>): BundledFiles =>
  async (relative) =>
    files[relative] ?? null;

const problems = (result: LoadResult) => (result.ok ? [] : result.problems.map(({ path, message }) => `${path}: ${message}`));

describe("loadConfiguration", () => {
  it("warns of a system prompt /v1/infer cannot render as a Jinja2 template, and loads it", async () => {
    const broken = await loadConfiguration(`${MINIMAL}customization:\n  system_prompt: "On {% if %}"\n`, {}, folder({}));
    expect(broken.ok && broken.loaded.warnings.filter((line) => line.startsWith("customization.system_prompt: not a valid Jinja2 template ("))).toHaveLength(1);
    const fine = await loadConfiguration(`${MINIMAL}customization:\n  system_prompt: "On {{ os | lower }}"\n`, {}, folder({}));
    expect(fine.ok && fine.loaded.warnings).toEqual([]);
  });


  it("warns that a PostgreSQL server on this machine is not reached without a ws_proxy", async () => {
    const text = `${MINIMAL}database:\n  postgres: {host: localhost, db: app, user: app}\n`;
    const result = await loadConfiguration(text, {}, folder({}));
    expect(result.ok && result.loaded.warnings).toContainEqual(expect.stringMatching(/^database\.postgres: without ws_proxy the store is reached at wss:\/\/localhost\/v2/));
    const relayed = await loadConfiguration(`${MINIMAL}database:\n  postgres: {host: localhost, db: app, user: app, ws_proxy: "ws://127.0.0.1:8080"}\n`, {}, folder({}));
    expect(relayed.ok && relayed.loaded.warnings).toEqual([]);
  });

  it("leaves out an MCP server whose credential file cannot be read, and loads the rest (the original's configurations name /tmp files)", async () => {
    const text = [
      MINIMAL.trimEnd(),
      "mcp_servers:",
      "  - {name: filed, url: 'http://mcp.example.com/mcp', authorization_headers: {Authorization: /tmp/lightspeed-mcp-test-token}}",
      "  - {name: shipped, url: 'http://mcp.example.com/other', authorization_headers: {Authorization: secrets/token}}",
      "",
    ].join("\n");
    const result = await loadConfiguration(text, {}, folder({ "secrets/token": "Bearer shipped\n" }));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.loaded.warnings).toEqual([
      "mcp_servers.0.authorization_headers.Authorization: /tmp/lightspeed-mcp-test-token is not a bundled file: name a file under config/ or env:NAME; ship the file under config/ or give the secret itself as ${env.NAME} (a Worker secret); the server is not used until it can be read",
    ]);
    expect([...result.loaded.heldSecrets]).toEqual([["mcp_servers.1.authorization_headers.Authorization", "Bearer shipped"]]);
  });

  it("reports a missing file beside an unset variable, whatever else is right", async () => {
    // The deploy's check leaves out the variables the Worker already holds as secrets: a file that
    // is missing must still be found then.
    const text = "inference_backend:\n  url: http://127.0.0.1:8321/v1\n  api_key: ${env.PROBE_UNSET_KEY}\ncustomization:\n  system_prompt_path: missing-prompt.txt\n";
    const found = problems(await loadConfiguration(text, {}, folder({})));
    expect(found).toContainEqual(expect.stringMatching(/^inference_backend\.api_key: .*PROBE_UNSET_KEY/));
    expect(found).toContainEqual(expect.stringMatching(/^customization\.system_prompt_path: .*missing-prompt\.txt/));
  });

  it("checks the agent card file as the inline card is, naming the key that names the file", async () => {
    const text = `${MINIMAL}customization:\n  agent_card_path: card.yaml\n`;
    const bad = await loadConfiguration(text, {}, folder({ "card.yaml": "name: 12\nskills: notalist\nbogus_field: 1\n" }));
    expect(problems(bad)).toEqual([
      "customization.agent_card_path: card.yaml is not a valid agent card: name: Invalid input: expected string, received number; skills: Invalid input: expected array, received string; bogus_field: unknown key",
    ]);
    const notYaml = await loadConfiguration(text, {}, folder({ "card.yaml": "- a\n b: [" }));
    expect(problems(notYaml)).toHaveLength(1);
    expect(problems(notYaml)[0]).toMatch(/^customization\.agent_card_path: card\.yaml is not a valid agent card: /);
  });

  it("serves the inline card when both are given, and the file's otherwise", async () => {
    const files = folder({ "card.yaml": "name: From the file\n" });
    const both = await loadConfiguration(`${MINIMAL}customization:\n  agent_card_path: card.yaml\n  agent_card_config: {name: Inline}\n`, {}, files);
    expect(both.ok && both.loaded.agentCard?.name).toBe("Inline");
    const file = await loadConfiguration(`${MINIMAL}customization:\n  agent_card_path: card.yaml\n`, {}, files);
    expect(file.ok && file.loaded.agentCard).toMatchObject({ name: "From the file", protocolVersion: "0.3.0" });
    const none = await loadConfiguration(MINIMAL, {}, files);
    expect(none.ok && none.loaded.agentCard).toBeNull();
  });

  it("counts the credentials URLs carry by their form among the secrets logs never show", async () => {
    const text =
      "inference_backend:\n  url: http://127.0.0.1:8321/v1\nauthentication:\n  module: jwk-token\n" +
      "  jwk_config:\n    url: http://jwksuser:Jwks%40Passw0rd@127.0.0.1:8573/jwks?access_token=QueryTok3nSecret77&kid=not-secret\n";
    const loaded = await loadConfiguration(text, {}, folder({}));
    expect(loaded.ok).toBe(true);
    expect(loaded.scrubbed).toEqual(expect.arrayContaining(["Jwks%40Passw0rd", "Jwks@Passw0rd", "QueryTok3nSecret77"]));
    expect(loaded.scrubbed).not.toContain("not-secret");
    expect(loaded.scrubbed).not.toContain("jwksuser");
  });

  it("warns that a signed agent card is served as the gateway completes it", async () => {
    const signed = `${MINIMAL}customization:\n  agent_card_config:\n    name: Signed\n    signatures: [{protected: abc, signature: def}]\n`;
    const loaded = await loadConfiguration(signed, {}, folder({}));
    expect(loaded.ok && loaded.loaded.warnings.some((line) => line.startsWith("the agent card's signatures are served as configured"))).toBe(true);
    const plain = await loadConfiguration(`${MINIMAL}customization:\n  agent_card_config: {name: Plain}\n`, {}, folder({}));
    expect(plain.ok && plain.loaded.warnings).toEqual([]);
  });

  it("loads role rule values that never match, as the original does, and says so", async () => {
    const text =
      `${MINIMAL}authentication:\n  module: jwk-token\n  jwk_config:\n    url: https://k.example.com\n    jwt_configuration:\n      role_rules:\n` +
      "        - {jsonpath: $.org_id, operator: equals, value: acme, roles: [a]}\n" +
      "        - {jsonpath: $.org_id, operator: equals, value: [acme], roles: [b]}\n" +
      "        - {jsonpath: $.org_id, operator: in, value: [acme, [x]], negate: true, roles: [c]}\n";
    const loaded = await loadConfiguration(text, {}, folder({}));
    expect(loaded.ok && loaded.loaded.warnings).toEqual([
      'authentication.jwk_config.jwt_configuration.role_rules.0.value: operator "equals" compares the list of values the path selects with "acme", which is not a list, so the rule never holds, as in the original; write ["acme"] to compare with "acme"',
      'authentication.jwk_config.jwt_configuration.role_rules.2.value: operator "in" looks for the list of values the path selects among the items of the value, and "acme", not a list, never equals it, as in the original; write [["acme"]] to compare with "acme" (the rule is negated: where it does not hold, it grants its roles)',
    ]);
  });
});
