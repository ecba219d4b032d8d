import pkg from "../package.json";

export const SERVICE_VERSION: string = pkg.version;
