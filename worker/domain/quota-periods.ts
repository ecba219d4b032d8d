// Quota period arithmetic, pure so it is tested without workerd. A limiter's counter is brought up
// to date from its stored next-reset time: every period that has elapsed applies once (refill to
// initial_quota, or add quota_increase), and the next reset moves past `now`. The same state and
// time always give the same result, so applying it twice changes nothing.

export interface LimiterSpec {
  type: "user_limiter" | "cluster_limiter";
  name: string;
  initial_quota: number;
  quota_increase: number;
  /** Seconds. */
  period: number;
}

export interface QuotaState {
  available: number;
  /** Unix seconds. */
  nextResetAt: number;
}

export function initialState(spec: LimiterSpec, now: number): QuotaState {
  return { available: spec.initial_quota, nextResetAt: now + spec.period };
}

/** The most a limiter holds for one question: its quota, or what a period adds when that is more. */
export function limiterCapacity(spec: Pick<LimiterSpec, "initial_quota" | "quota_increase">): number {
  return Math.max(spec.initial_quota, spec.quota_increase);
}

/** How many periods have elapsed at `now`, and the state after applying them. */
export function catchUp(state: QuotaState, spec: LimiterSpec, now: number): { state: QuotaState; periods: number } {
  if (now < state.nextResetAt) return { state, periods: 0 };
  const periods = Math.floor((now - state.nextResetAt) / spec.period) + 1;
  const available = spec.quota_increase > 0 ? state.available + periods * spec.quota_increase : spec.initial_quota;
  return { state: { available, nextResetAt: state.nextResetAt + periods * spec.period }, periods };
}

/** The subject a limiter counts for a user: the user for user limiters, one shared subject for the cluster. */
export function quotaSubject(spec: Pick<LimiterSpec, "type">, userId: string): string {
  return spec.type === "cluster_limiter" ? CLUSTER_SUBJECT : userId;
}

export const CLUSTER_SUBJECT = "cluster";
