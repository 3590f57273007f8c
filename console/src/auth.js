// The access token: kept in sessionStorage (key "airlock.token") for this tab only, sent
// only as the authorization header (api.js), never put in a URL or logged. Signing out, or
// any call failing UNAUTHENTICATED, clears it and brings back the sign-in form with a message.
// Being per tab, it is not in a new tab or window: the sign-in form says so (login.js).

import { createStore } from "./store.js";

const KEY = "airlock.token";

function read() {
  try {
    return sessionStorage.getItem(KEY) || "";
  } catch {
    return "";
  }
}

/**
 * { token, message, checking, signedOut }: message is why the sign-in form is shown again,
 * if it is; checking is true while a token just entered is being tried (the form stays up);
 * signedOut is true after the user signed out (rather than a tab that never had a token).
 */
export const authStore = createStore({ token: read(), message: "", checking: false, signedOut: false });

export function getToken() {
  return authStore.get().token;
}

/** Keeps `token`; while `checking`, the sign-in form stays up (see confirmSignIn). */
export function setToken(token, { checking = false } = {}) {
  try {
    sessionStorage.setItem(KEY, token);
  } catch {
    // Storage refused (private mode, quota): the token lasts as long as the page.
  }
  authStore.set({ token, message: "", checking, signedOut: false });
}

/** The token was accepted: open the console. */
export function confirmSignIn() {
  authStore.set({ ...authStore.get(), checking: false, message: "" });
}

/** Forgets the token; `message` is shown on the sign-in form. Without one, the user signed out. */
export function signOut(message = "") {
  try {
    sessionStorage.removeItem(KEY);
  } catch {
    // Nothing stored.
  }
  const s = authStore.get();
  const signedOut = !message;
  if (s.token || s.message !== message || s.checking || s.signedOut !== signedOut) {
    authStore.set({ token: "", message, checking: false, signedOut });
  }
}
