import { errors } from "../errors.ts";

// RFC 6750: the scheme name is case-insensitive and the credential is a single token68 (no spaces).
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

/**
 * The credential of `Authorization: Bearer <token>`. Throws the two 401 causes SPEC lists for a
 * missing header and for a header that carries no bearer token (wrong scheme, empty, extra parts).
 */
export function bearerToken(request: Request): string {
  const header = request.headers.get("Authorization");
  if (header === null) throw errors.unauthorized("No Authorization header found");
  const token = BEARER.exec(header.trim())?.[1];
  if (token === undefined) throw errors.unauthorized("No token found in Authorization header");
  return token;
}
