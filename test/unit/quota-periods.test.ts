import { describe, expect, it } from "vitest";
import { catchUp, initialState, quotaSubject, type LimiterSpec } from "../../worker/domain/quota-periods.ts";

const refill: LimiterSpec = { type: "user_limiter", name: "daily", initial_quota: 100, quota_increase: 0, period: 60 };
const increase: LimiterSpec = { type: "cluster_limiter", name: "grow", initial_quota: 10, quota_increase: 5, period: 60 };

describe("quota periods", () => {
  it("starts full with the first reset one period ahead", () => {
    expect(initialState(refill, 1000)).toEqual({ available: 100, nextResetAt: 1060 });
  });

  it("changes nothing before the reset time", () => {
    expect(catchUp({ available: 3, nextResetAt: 1060 }, refill, 1059)).toEqual({ state: { available: 3, nextResetAt: 1060 }, periods: 0 });
  });

  it("refills to initial_quota once however many periods elapsed", () => {
    expect(catchUp({ available: -20, nextResetAt: 1060 }, refill, 1060)).toEqual({ state: { available: 100, nextResetAt: 1120 }, periods: 1 });
    expect(catchUp({ available: -20, nextResetAt: 1060 }, refill, 1250)).toEqual({ state: { available: 100, nextResetAt: 1300 }, periods: 4 });
  });

  it("adds quota_increase for each elapsed period", () => {
    expect(catchUp({ available: 2, nextResetAt: 1060 }, increase, 1185)).toEqual({ state: { available: 17, nextResetAt: 1240 }, periods: 3 });
  });

  it("never applies a period twice", () => {
    const once = catchUp({ available: 0, nextResetAt: 1060 }, increase, 1100).state;
    expect(catchUp(once, increase, 1100)).toEqual({ state: once, periods: 0 });
  });

  it("counts user limiters per user and the cluster limiter once", () => {
    expect(quotaSubject(refill, "u1")).toBe("u1");
    expect(quotaSubject(increase, "u1")).toBe(quotaSubject(increase, "u2"));
  });
});
