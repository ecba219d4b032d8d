import { describe, expect, it } from "vitest";
import * as z from "zod";
import { validationError } from "../../worker/validation.ts";

function causeOf(schema: z.ZodType, value: unknown): { response: string; cause: string } {
  const result = schema.safeParse(value);
  if (result.success) throw new Error("expected the value to be refused");
  const error = validationError(result.error);
  return { response: error.response, cause: error.cause };
}

describe("validationError", () => {
  const Question = z.strictObject({
    question: z
      .string()
      .min(1)
      .refine((question) => question.trim() !== "", "Question cannot be empty or whitespace-only"),
    count: z.int().min(1).max(5),
  });

  it("gives one cause per field, the first check it failed, where later checks only repeat it", async () => {
    // POST /v1/infer {"question": ""} said both "Too small" and "cannot be empty".
    expect(causeOf(Question, { question: "", count: 1 })).toEqual({
      response: "Invalid attribute value",
      cause: "question: String should have at least 1 character",
    });
    expect(causeOf(Question, { question: "   ", count: 1 }).cause).toBe("question: Question cannot be empty or whitespace-only");
  });

  it("still names every field that failed", () => {
    expect(causeOf(Question, { question: "", count: 9 }).cause).toBe(
      "question: String should have at least 1 character; count: Input should be less than or equal to 5",
    );
  });

  it("words the common checks as the original does, which its clients look for", () => {
    const Body = z.strictObject({ name: z.string().max(3), tags: z.array(z.string()).min(2), flag: z.boolean().optional() });
    expect(causeOf(Body, { name: "long", tags: ["a"], flag: "yes", extra: 1 }).cause).toBe(
      "name: String should have at most 3 characters; tags: List should have at least 2 items; flag: Input should be a valid boolean; unknown field(s): extra (Extra inputs are not permitted)",
    );
  });
});
