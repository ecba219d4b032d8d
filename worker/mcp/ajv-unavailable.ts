// Stands in for ajv and ajv-formats in the bundle (wrangler.toml [alias]): the MCP SDK's client
// imports AJV as its default validator, but Parley always passes the cfworker one
// (worker/mcp/client.ts), and AJV compiles schemas with code generation, which workerd forbids.
export default class AjvUnavailable {
  constructor() {
    throw new Error("ajv is not bundled: JSON Schema validation uses @cfworker/json-schema");
  }
}
