import { DurableObject } from "cloudflare:workers";

export class A2AContextDO extends DurableObject<Env> {}
