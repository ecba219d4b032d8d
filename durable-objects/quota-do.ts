import { DurableObject } from "cloudflare:workers";

export class QuotaDO extends DurableObject<Env> {}
