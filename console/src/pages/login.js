// The sign-in form: an access token, checked with Daemon.GetInfo before the console opens.
// A refused token is forgotten again and the server's message is shown.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, errorMessage } from "../api.js";
import { confirmSignIn, setToken, signOut } from "../auth.js";
import { useTitle } from "../components.js";
import { html } from "../html.js";

export function LoginPage({ message, onSignedIn }) {
  useTitle("Sign in");
  const [error, setError] = useState(message || "");
  const [busy, setBusy] = useState(false);
  const input = useRef(null);

  useEffect(() => setError(message || ""), [message]);
  useEffect(() => input.current?.focus(), []);

  const submit = async (event) => {
    event.preventDefault();
    const token = input.current.value.trim();
    if (!token) {
      setError("Enter the access token the daemon's operator gave you.");
      input.current.focus();
      return;
    }
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

  return html`
    <main id="main" class="login">
      <div class="login-card">
        <div class="brand brand-big"><img src="favicon.svg" alt="" width="32" height="32" /><span>airlock</span></div>
        <h1>Sign in</h1>
        <p class="muted">The console of an airlock daemon. Use an access token of its tenants; it stays in this tab only.</p>
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
