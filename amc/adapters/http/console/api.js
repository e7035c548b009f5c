// The console's only way to the server: fetch with the token as a Bearer header.
//
// The token lives in this tab's sessionStorage. It is gone when the tab closes, and the
// browser never attaches it to a request by itself the way it does a cookie, so another
// site cannot make this browser act with it (no cross-site request forgery); only this
// page's own code sends it, and only to this origin (the CSP allows no other).

const KEY = "amc.token";

export const session = {
  get token() {
    return sessionStorage.getItem(KEY);
  },
  signIn(token) {
    sessionStorage.setItem(KEY, token);
  },
  signOut() {
    sessionStorage.removeItem(KEY);
  },
};

// Raised when the server refuses the token: the app shows the sign-in page.
export class SignedOut extends Error {}

export async function request(path, { method = "GET", body, headers = {}, signal } = {}) {
  const token = session.token;
  if (!token) throw new SignedOut("no token");
  const sent = { Authorization: "Bearer " + token, ...headers };
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers: sent,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
    signal,
  });
  if (response.status === 401) {
    session.signOut();
    window.dispatchEvent(new CustomEvent("amc:signed-out", { detail: "The server refused the token." }));
    throw new SignedOut("the token was refused");
  }
  return response;
}

// {ok, status, data}: data is the JSON body (a problem document when not ok).
export async function call(path, options) {
  const response = await request(path, options);
  let data = null;
  const type = response.headers.get("content-type") || "";
  if (type.includes("json")) data = await response.json();
  return { ok: response.ok, status: response.status, data };
}

// The detail of a problem document, or a line saying what went wrong.
export function problemText(answer) {
  const data = answer.data || {};
  return data.detail ? `${data.title || "Refused"}: ${data.detail}` : `The server answered ${answer.status}.`;
}
