// The documented defaults of MCP tool execution (README "MCP tools"). One place, so that the
// README, the client and the tests name the same numbers.

/** A server's `timeout` when it names none: one list or call, connection included, in seconds. */
export const MCP_DEFAULT_TIMEOUT_SECONDS = 30;

/** A tool's output handed to the model is cut to this many bytes of UTF-8, with a note that it was cut. */
export const MCP_OUTPUT_LIMIT_BYTES = 64 * 1024;

/** How long one isolate reuses a server's tool list (per URL and credentials), in seconds. */
export const MCP_TOOL_LIST_TTL_SECONDS = 60;

/**
 * How long one isolate remembers that a server's tools could not be listed, in seconds: short, so
 * that a server that is back is soon used again, yet long enough that a down or hung server costs
 * one request per period its time-out rather than every request.
 */
export const MCP_TOOL_LIST_FAILURE_TTL_SECONDS = 15;

/** The OAuth 401 probe's own bound, in seconds (as in the original system). */
export const MCP_AUTH_PROBE_TIMEOUT_SECONDS = 10;

/** Tool list pages read from one server before the rest are ignored. */
export const MCP_TOOL_LIST_MAX_PAGES = 20;

/** Tool lists cached per isolate, oldest dropped beyond this. */
export const MCP_TOOL_LIST_CACHE_ENTRIES = 256;

/** Model calls in one turn when the request names no max_infer_iters (the tool loop's bound). */
export const MCP_DEFAULT_MAX_INFER_ITERS = 10;

/** MCP tool calls the gateway runs in one turn when the request names no max_tool_calls. */
export const MCP_DEFAULT_MAX_TOOL_CALLS = 20;

/** How long one isolate reuses the list of servers registered through the API, in seconds. */
export const MCP_REGISTRY_TTL_SECONDS = 10;
