// Asks for the API key when the page was opened without one (or with one the server refused).
import { el, notice } from "../dom.js";

export class KeyFormView {
  constructor(keyStore, onKey, message) {
    this.keyStore = keyStore;
    this.onKey = onKey;
    this.message = message;
  }

  mount(root) {
    const input = el("input", {
      type: "password",
      id: "api-key",
      name: "api-key",
      autocomplete: "off",
      spellcheck: "false",
      required: true,
      testid: "key-input",
      placeholder: "local API key",
    });
    const form = el(
      "form",
      {
        class: "card key-form",
        testid: "key-form",
        onsubmit: (event) => {
          event.preventDefault();
          const key = input.value.trim();
          if (!key) return;
          this.keyStore.set(key);
          this.onKey();
        },
      },
      el("h1", {}, "API key needed"),
      el(
        "p",
        {},
        "Open the sign-in link the local platform printed when it started (",
        el("code", {}, "…/_viewer/login?token=…"),
        "; restarting it with ",
        el("code", {}, "make local"),
        " prints a new one), or paste the key from the ",
        el("code", {}, "api-key"),
        " file of its data directory. A pasted key stays in this tab only.",
      ),
      this.message ? notice(this.message, "key-error", "error") : null,
      el("label", { for: "api-key" }, "API key"),
      el("div", { class: "row" }, input, el("button", { type: "submit", testid: "key-submit" }, "Open viewer")),
    );
    root.append(form);
    input.focus();
  }

  dispose() {}
}
