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
});
