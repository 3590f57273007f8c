// The sign-in form: an access token, checked with Daemon.GetInfo before the console opens.
// A refused token is forgotten again and the server's message is shown. A pasted token is
// trimmed, and one holding a character no HTTP header may carry (a typographic quote, a
// space inside) is refused in words before it is ever sent. With nothing else to say, the
// form says why it is there: the token is kept per tab, so a new tab or window asks again.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, errorMessage } from "../api.js";
import { authStore, confirmSignIn, setToken, signOut } from "../auth.js";
import { useTitle } from "../components.js";
import { html } from "../html.js";
import { useStore } from "../store.js";
import { checkToken } from "../undo.js";

export function LoginPage({ message, onSignedIn }) {
  useTitle("Sign in");
  const auth = useStore(authStore);
  const [error, setError] = useState(message || "");
  const [busy, setBusy] = useState(false);
  const input = useRef(null);

  useEffect(() => setError(message || ""), [message]);
  useEffect(() => input.current?.focus(), []);

  const submit = async (event) => {
    event.preventDefault();
    const { token, error: refused } = checkToken(input.current.value);
    if (refused) {
      // Nothing is stored or sent: the form stays, with the token as pasted, to fix.
      setError(refused);
      input.current.focus();
      return;
    }
    input.current.value = token;
    setBusy(true);
    setError("");
    // Stored first so that the interceptor sends it; forgotten again if refused.
    setToken(token, { checking: true });
    try {
      const info = await api.daemon.getInfo({});
      if (input.current) input.current.value = "";
      onSignedIn(info);
      confirmSignIn();
    } catch (err) {
      const text = errorMessage(err);
      signOut(text);
      setError(text);
      setBusy(false);
      input.current?.focus();
      input.current?.select();
    }
  };

  // Why the form is up, when no error says it: signed out just now, or a tab without a token.
  const why = error
    ? null
    : auth.signedOut
      ? html`<p role="status" class="login-note" data-testid="login-note" data-why="signed-out">Signed out.</p>`
      : html`<p class="login-note" data-testid="login-note" data-why="new-tab">
          The token is kept for each tab on its own (in the tab's session storage), so a new tab or window asks for it again.</p>`;

  return html`
    <main id="main" class="login">
      <div class="login-card">
        <div class="brand brand-big"><img src="favicon.svg" alt="" width="32" height="32" /><span>airlock</span></div>
        <h1>Sign in</h1>
        <p class="muted">The console of an airlock daemon. Use an access token of its tenants; it stays in this tab only.</p>
        ${why}
        <form data-testid="login" onSubmit=${submit} novalidate>
          <label for="token">Access token</label>
          <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" ref=${input}
            aria-describedby=${error ? "login-error" : undefined} aria-invalid=${error ? "true" : undefined} />
          ${error && html`<p role="alert" id="login-error" class="alert" data-testid="login-error">${error}</p>`}
          <button type="submit" class="primary" disabled=${busy}>${busy ? "Signing in…" : "Sign in"}</button>
        </form>
      </div>
    </main>
  `;
}
