// Where a caller may point the gateway: MCP servers registered through the API and client-provided
// `mcp` tools name a URL the gateway then connects to, from inside the deployment. Without a check
// any caller could make it reach loopback services, the private network or a cloud metadata
// endpoint (server-side request forgery). The operator's own static servers are not checked.
//
// A Worker cannot resolve a hostname before connecting (there is no DNS API), so only what the URL
// itself says can be judged: literal addresses in every form the URL parser accepts (it already
// turns 2130706433, 0x7f.1 and 127.1 into 127.0.0.1) and names that are internal by convention. A
// public name whose DNS points inward is not caught here; on Cloudflare's network a Worker's fetch
// cannot reach a private network in the first place, so that gap matters where workerd is hosted
// elsewhere.
import { errors, type ApiError } from "../errors.ts";

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

/** Top-level names and suffixes that only ever resolve inside a network (RFC 6761, 6762, 8375, ICANN .internal). */
const INTERNAL_SUFFIXES = [
  "localhost",
  "local",
  "localdomain",
  "internal",
  "intranet",
  "lan",
  "home",
  "corp",
  "home.arpa",
  "svc",
];

/** Public names that resolve to loopback or to whatever address they embed (wildcard DNS services). */
const LOOPBACK_ALIASES = ["localtest.me", "lvh.me", "vcap.me", "nip.io", "sslip.io", "xip.io"];

/** Internal names without the conventional suffixes that clouds answer on their metadata networks. */
const METADATA_NAMES = new Set(["metadata", "instance-data", "metadata.google.internal", "metadata.azure.com"]);

/** What a URL of another scheme is told (the original's check names the scheme). */
export const NOT_HTTP = "must be an http or https URL (scheme http:// or https://)";

/**
 * Whether `url` may be used as an MCP server address from a caller: http(s) only, and not an
 * internal address unless its host is listed in `allowedHosts` (mcp_security.allowed_internal_hosts).
 */
export function checkServerUrl(url: string, allowedHosts: readonly string[]): AddressVerdict {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: "is not a valid URL" };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return { ok: false, reason: NOT_HTTP };
  const host = normalizeHost(parsed.hostname);
  if (allowedHosts.some((allowed) => normalizeHost(allowed) === host)) return { ok: true };
  const internal = internalHostReason(host);
  if (internal !== null) return { ok: false, reason: `names ${internal} (${host})` };
  const decimal = decimalReading(url);
  const alsoInternal = decimal === null ? null : internalHostReason(decimal);
  return alsoInternal === null ? { ok: true } : { ok: false, reason: `names ${alsoInternal} (${decimal}, its leading zeros read as decimal)` };
}

/**
 * The 422 a caller gets for a refused server URL, naming the field; undefined when the URL is fine.
 * `field` is how the request names it (url, tools[2].server_url).
 */
export function serverUrlError(field: string, url: string, allowedHosts: readonly string[]): ApiError | undefined {
  const verdict = checkServerUrl(url, allowedHosts);
  if (verdict.ok) return undefined;
  const hint = verdict.reason.startsWith("names ") ? "; an operator can allow the host in mcp_security.allowed_internal_hosts" : "";
  return errors.invalidValue(`${field}: ${verdict.reason}${hint}`);
}

/**
 * The address a URL's host means when its zero-padded dotted quad is read as decimal: 010.1.2.3 is
 * 8.1.2.3 to the URL parser (octal) but 10.1.2.3 to other software, so both readings are judged.
 * Null when the host is not written that way.
 */
function decimalReading(url: string): string | null {
  const authority = /^\s*[a-z][a-z0-9+.-]*:[\\/]*([^/\\?#]*)/i.exec(url)?.[1] ?? "";
  const host = authority
    .slice(authority.lastIndexOf("@") + 1)
    .replace(/:\d*$/, "")
    .replace(/\.$/, "");
  if (!/^\d+\.\d+\.\d+\.\d+$/.test(host) || !/(^|\.)0\d/.test(host)) return null;
  return host
    .split(".")
    .map((part) => String(Number(part)))
    .join(".");
}

/** What kind of internal host `host` (a normalized hostname) is, or null for a public one. */
export function internalHostReason(host: string): string | null {
  const ipv4 = parseIpv4(host);
  if (ipv4 !== null) return ipv4Reason(ipv4);
  const ipv6 = parseIpv6(host);
  if (ipv6 !== null) return ipv6Reason(ipv6);
  if (METADATA_NAMES.has(host)) return "a cloud metadata host";
  // A dotless name is completed by the resolver's local search domains: it can only mean a local host.
  if (!host.includes(".")) return "an internal host name";
  if (INTERNAL_SUFFIXES.some((suffix) => host === suffix || host.endsWith(`.${suffix}`))) return "an internal host name";
  if (LOOPBACK_ALIASES.some((alias) => host === alias || host.endsWith(`.${alias}`))) return "a name that resolves to an internal address";
  return null;
}

/** Lower case, no IPv6 brackets, no trailing root dot; literal IPv4 forms made canonical by the URL parser. */
export function normalizeHost(host: string): string {
  let text = host.trim().toLowerCase();
  if (text.includes(":") && !text.startsWith("[")) text = `[${text}]`;
  try {
    text = new URL(`http://${text}/`).hostname;
  } catch {
    // Not a valid host: compared as written.
  }
  if (text.startsWith("[") && text.endsWith("]")) text = text.slice(1, -1);
  return text.endsWith(".") ? text.slice(0, -1) : text;
}

function parseIpv4(text: string): number | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (!match) return null;
  const octets = match.slice(1).map(Number);
  if (octets.some((octet) => octet > 255)) return null;
  return ((octets[0]! << 24) >>> 0) + (octets[1]! << 16) + (octets[2]! << 8) + octets[3]!;
}

type Range = [base: string, bits: number, reason: string];

// Most specific first: the metadata addresses sit inside the link-local and CGNAT ranges.
const IPV4_RANGES: Range[] = [
  ["169.254.169.254", 32, "a cloud metadata address"],
  ["169.254.170.2", 32, "a cloud metadata address"],
  ["100.100.100.200", 32, "a cloud metadata address"],
  ["168.63.129.16", 32, "a cloud metadata address"],
  ["192.0.0.192", 32, "a cloud metadata address"],
  ["0.0.0.0", 8, "an unspecified address"],
  ["10.0.0.0", 8, "a private address"],
  ["100.64.0.0", 10, "a carrier-grade NAT address"],
  ["127.0.0.0", 8, "a loopback address"],
  ["169.254.0.0", 16, "a link-local address"],
  ["172.16.0.0", 12, "a private address"],
  ["192.0.0.0", 24, "a reserved address"],
  ["192.168.0.0", 16, "a private address"],
  ["198.18.0.0", 15, "a reserved address"],
  ["224.0.0.0", 4, "a multicast address"],
  ["240.0.0.0", 4, "a reserved address"],
];

const IPV4_TABLE = IPV4_RANGES.map(([base, bits, reason]) => {
  const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { network: (parseIpv4(base)! & mask) >>> 0, mask, reason };
});

function ipv4Reason(address: number): string | null {
  for (const { network, mask, reason } of IPV4_TABLE) if (((address & mask) >>> 0) === network) return reason;
  return null;
}

/** Eight 16-bit groups, or null when `text` is not an IPv6 address. Accepts a trailing dotted quad. */
function parseIpv6(text: string): number[] | null {
  if (!text.includes(":") || !/^[0-9a-f:.]+$/.test(text)) return null;
  let body = text;
  const dotted = /(\d{1,3}(?:\.\d{1,3}){3})$/.exec(body);
  if (dotted) {
    const v4 = parseIpv4(dotted[1]!);
    if (v4 === null) return null;
    body = `${body.slice(0, dotted.index)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return null;
  const groups = (part: string) => (part === "" ? [] : part.split(":"));
  const head = groups(halves[0]!);
  const rest = halves.length === 2 ? groups(halves[1]!) : [];
  if ([...head, ...rest].some((group) => !/^[0-9a-f]{1,4}$/.test(group))) return null;
  const known = head.length + rest.length;
  if (halves.length === 1 ? known !== 8 : known > 7) return null;
  const zeros = new Array<number>(halves.length === 2 ? 8 - known : 0).fill(0);
  return [...head, ...zeros.map(String), ...rest].map((group) => parseInt(group, 16));
}

function embeddedIpv4(high: number, low: number): number {
  return ((high << 16) >>> 0) + low;
}

function ipv6Reason(g: number[]): string | null {
  const zeroUpTo = (n: number) => g.slice(0, n).every((group) => group === 0);
  if (zeroUpTo(8)) return "an unspecified address";
  if (zeroUpTo(7) && g[7] === 1) return "a loopback address";
  // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) carry an
  // IPv4 address that is what the connection really reaches.
  if ((zeroUpTo(5) && g[5] === 0xffff) || zeroUpTo(6) || (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0))) {
    return ipv4Reason(embeddedIpv4(g[6]!, g[7]!));
  }
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return "a private address";
  // 6to4 embeds the IPv4 address in bits 16-47; Teredo its client address, inverted, in the last 32.
  if (g[0] === 0x2002) return ipv4Reason(embeddedIpv4(g[1]!, g[2]!));
  if (g[0] === 0x2001 && g[1] === 0) return ipv4Reason(embeddedIpv4(g[6]! ^ 0xffff, g[7]! ^ 0xffff));
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g[7] === 0x254) {
    return "a cloud metadata address";
  }
  if ((g[0]! & 0xfe00) === 0xfc00) return "a private address";
  if ((g[0]! & 0xffc0) === 0xfe80) return "a link-local address";
  if ((g[0]! & 0xffc0) === 0xfec0) return "a private address";
  if ((g[0]! & 0xff00) === 0xff00) return "a multicast address";
  return null;
}
