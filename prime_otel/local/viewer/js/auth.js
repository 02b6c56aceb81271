// The API key arrives once in the URL fragment (#key=...), or from /_viewer/session when this browser
// opened a sign-in link (an HttpOnly cookie; see _viewer_login.py). It lives in sessionStorage for this
// tab only, and a fragment key is removed from the address bar so it does not end up in history or screenshots.

const STORAGE_KEY = "prime-otel.local.api-key";
const FRAGMENT = /^#key=([^&]*)(?:&(.*))?$/;

export class KeyStore {
  constructor(storage = window.sessionStorage) {
    this.storage = storage;
  }

  consumeFragment() {
    const match = FRAGMENT.exec(window.location.hash);
    if (!match) return;
    const key = decodeURIComponent(match[1]).trim();
    if (key) this.set(key);
    const rest = match[2] ? `#${match[2]}` : "";
    window.history.replaceState(null, "", `${window.location.pathname}${window.location.search}${rest}`);
  }

  // A browser signed in by a sign-in link gets the key for this tab; otherwise nothing changes.
  async fromSession() {
    try {
      const response = await fetch("/_viewer/session", { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const body = await response.json();
      if (typeof body.api_key === "string" && body.api_key) this.set(body.api_key);
    } catch {
      // No session: the key form asks.
    }
  }

  // Forgets the key in this tab and signs this browser out.
  async forget() {
    this.clear();
    try {
      await fetch("/_viewer/logout", { method: "POST", credentials: "same-origin" });
    } catch {
      // The cookie stays until it expires; this tab no longer holds the key either way.
    }
  }

  get() {
    return this.storage.getItem(STORAGE_KEY);
  }

  set(key) {
    this.storage.setItem(STORAGE_KEY, key);
  }

  clear() {
    this.storage.removeItem(STORAGE_KEY);
  }
}
