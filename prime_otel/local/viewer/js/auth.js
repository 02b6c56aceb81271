// The API key arrives once in the URL fragment (#key=...), lives in sessionStorage for this
// tab only, and is removed from the address bar so it does not end up in history or screenshots.

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
