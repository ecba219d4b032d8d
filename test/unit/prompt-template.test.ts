import { describe, expect, it } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { checkTemplate, renderPrompt, templateVariables } from "../../worker/turn/prompt-template.ts";

function thrown(run: () => unknown): ApiError {
  try {
    run();
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error("expected an ApiError");
}

const IMAGE = { type: "input_image", image_url: "https://example.com/cat.png", detail: "auto" } as const;
const FILE = { type: "input_file", file_id: "file-1" } as const;

describe("templateVariables", () => {
  it("lists each placeholder once, in order of first use, spaces inside the braces allowed", () => {
    expect(templateVariables("Hi {{name}}, about {{ topic }}: {{name}} and {{  city}}")).toEqual(["name", "topic", "city"]);
  });

  it("ignores text that only looks like a placeholder", () => {
    expect(templateVariables("{name} {{}} {{ two words }} {{9lives}} {{ok_1}}")).toEqual(["ok_1"]);
  });

  it("finds nothing in a plain text", () => {
    expect(templateVariables("You are a helpful assistant.")).toEqual([]);
  });
});

describe("checkTemplate", () => {
  it("accepts placeholders that are all declared, and unused declarations", () => {
    expect(() => checkTemplate("Hi {{name}}", ["name", "spare"])).not.toThrow();
    expect(() => checkTemplate("No placeholders", [])).not.toThrow();
  });

  it("rejects undeclared placeholders with a 422 naming them", () => {
    const error = thrown(() => checkTemplate("Hi {{name}} from {{city}} in {{country}}", ["name"]));
    expect(error.status).toBe(422);
    expect(error.response).toBe("Invalid attribute value");
    expect(error.cause).toContain("city, country");
    expect(error.cause).not.toContain("name");
  });
});

describe("renderPrompt", () => {
  it("substitutes plain strings and input_text values, every occurrence", () => {
    const result = renderPrompt("Dear {{ name }}, {{topic}} again, {{name}}.", ["name", "topic"], {
      name: "Ada",
      topic: { type: "input_text", text: "engines" },
    });
    expect(result).toEqual({ text: "Dear Ada, engines again, Ada.", parts: [] });
  });

  it("replaces image and file placeholders with a reference and returns the parts in order of use", () => {
    const result = renderPrompt("Compare {{doc}} with {{picture}}; see {{doc}} again.", ["picture", "doc"], { picture: IMAGE, doc: FILE });
    expect(result.text).toBe("Compare [file: doc] with [image: picture]; see [file: doc] again.");
    expect(result.parts).toEqual([FILE, IMAGE]);
  });

  it("does not expand placeholders inside a substituted value", () => {
    const result = renderPrompt("{{a}} and {{b}}", ["a", "b"], { a: "{{b}}", b: "B" });
    expect(result.text).toBe("{{b}} and B");
  });

  it("accepts a template without placeholders and no variables", () => {
    expect(renderPrompt("Just text.", [], undefined)).toEqual({ text: "Just text.", parts: [] });
    expect(renderPrompt("Just text.", ["unused"], null)).toEqual({ text: "Just text.", parts: [] });
  });

  it("does not require declared variables the template never uses", () => {
    expect(renderPrompt("Hi {{name}}", ["name", "unused"], { name: "Ada" }).text).toBe("Hi Ada");
  });

  it("does not attach an image given for a variable the template never uses", () => {
    expect(renderPrompt("Hi {{name}}", ["name", "photo"], { name: "Ada", photo: IMAGE }).parts).toEqual([]);
  });

  it("leaves placeholders of undeclared names as written", () => {
    expect(renderPrompt("Hi {{name}} {{other}}", ["name"], { name: "Ada" }).text).toBe("Hi Ada {{other}}");
  });

  it("a used variable not given, or null, is a 422 missing attribute naming the variables", () => {
    const error = thrown(() => renderPrompt("{{a}} {{b}} {{c}}", ["a", "b", "c"], { a: "x", b: null }));
    expect(error.status).toBe(422);
    expect(error.response).toBe("Missing required attributes");
    expect(error.cause).toContain("b, c");
    expect(thrown(() => renderPrompt("{{a}}", ["a"], undefined)).cause).toContain("a");
  });

  it("a given name that is not declared is a 422 invalid attribute naming it", () => {
    const error = thrown(() => renderPrompt("{{a}}", ["a"], { a: "x", ghost: "y", spook: null }));
    expect(error.status).toBe(422);
    expect(error.response).toBe("Invalid attribute value");
    expect(error.cause).toContain("ghost, spook");
  });
});
