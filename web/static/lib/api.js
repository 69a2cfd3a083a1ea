// The REST client: adds the token, turns 401 into a login prompt and 404
// into "not available".
import { signal } from "/vendor/signals.mjs";

const KEY = "apollo.token";
export const needLogin = signal(false);
export const toast = signal(""); // one line shown for a few seconds

export function token() {
  try { return localStorage.getItem(KEY) || ""; } catch { return ""; }
}

// refused forgets a token the server refused (revoked, mistyped) and asks
// for another: the secret is not kept, and the login box starts empty.
// sent is the token the refused request carried ("" for none): when the
// user signed in since (a 401 answering a request sent before), the new
// token stays, and refused answers false.
export function refused(sent) {
  if (token() !== sent) return false;
  try { localStorage.removeItem(KEY); } catch { /* private mode */ }
  needLogin.value = true;
  return true;
}

export function setToken(t) {
  try { t ? localStorage.setItem(KEY, t) : localStorage.removeItem(KEY); } catch { /* private mode */ }
  needLogin.value = false;
}

export class NotFound extends Error {}

export class APIError extends Error {
  constructor(status, body) {
    super(body?.error?.message || body?.error || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

// api fetches a path of the API and decodes JSON. It throws NotFound for a
// 404 (an endpoint this server does not have yet) and APIError otherwise.
// ifMatch sends If-Match: the version (ETag) of what the change was made
// from, which the server refuses if it is another one now.
export async function api(path, opts) {
  return (await tagged(path, opts)).data;
}

// tagged is api, answering {data, tag}: the answer's ETag too.
export async function tagged(path, { method = "GET", body, type = "application/json", ifMatch } = {}) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = type;
  if (ifMatch) headers["If-Match"] = ifMatch;
  let res;
  try {
    res = await fetch(path, {
      method, headers,
      body: body === undefined ? undefined : type === "application/json" ? JSON.stringify(body) : body,
    });
  } catch { // the browser says only "Failed to fetch"
    throw new APIError(0, { error: { message: "the server cannot be reached" } });
  }
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (res.status === 401) {
    refused(t);
    throw new APIError(401, data);
  }
  // A 404 is a missing endpoint (an older server) or a missing thing (a
  // task ID); pages show "not available" or the message.
  if (res.status === 404) throw new NotFound(data?.error?.message || `${path}: not found`);
  if (!res.ok) throw new APIError(res.status, data);
  return { data, tag: res.headers.get("ETag") || "" };
}
