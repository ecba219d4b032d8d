import { exports } from "cloudflare:workers";
import { expect, it } from "vitest";
it("serves liveness", async () => {
  const res = await exports.default.fetch("http://x/liveness");
  expect(res.status).toBe(200);
  console.log(await res.text());
});
