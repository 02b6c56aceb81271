// Entry point: takes the key from the fragment, then renders the view the route names.
import { ApiClient, UnauthorizedError } from "./api.js";
import { KeyStore } from "./auth.js";
import { notice } from "./dom.js";
import { currentRoute } from "./router.js";
import { KeyFormView } from "./views/keyform.js";
import { RunView } from "./views/run.js";
import { RunsView } from "./views/runs.js";

class App {
  constructor(root, forgetButton) {
    this.root = root;
    this.forgetButton = forgetButton;
    this.keyStore = new KeyStore();
    this.api = new ApiClient(this.keyStore);
    this.view = null;
  }

  async start() {
    this.keyStore.consumeFragment();
    if (!this.keyStore.get()) await this.keyStore.fromSession();
    window.addEventListener("hashchange", () => {
      // A key pasted into the address bar of an open tab arrives here, not at load.
      if (window.location.hash.startsWith("#key=")) this.keyStore.consumeFragment();
      this.render();
    });
    this.forgetButton.addEventListener("click", async () => {
      await this.keyStore.forget();
      this.render();
    });
    this.render();
  }

  show(view) {
    this.view?.dispose();
    this.view = view;
    this.root.replaceChildren();
    this.forgetButton.hidden = !this.keyStore.get();
    return view.mount(this.root);
  }

  render(message) {
    if (!this.keyStore.get()) {
      const expired = new URLSearchParams(window.location.search).get("signin") === "expired";
      const why = message ?? (expired ? "That sign-in link was already used or has expired." : undefined);
      this.show(new KeyFormView(this.keyStore, () => this.render(), why));
      return;
    }
    const route = currentRoute();
    const unauthorized = (error) => this.rejectKey(error);
    const view =
      route.name === "run" ? new RunView(this.api, route, unauthorized) : new RunsView(this.api, unauthorized);
    Promise.resolve(this.show(view)).catch((error) => {
      if (this.view !== view) return;
      if (error instanceof UnauthorizedError) this.rejectKey(error);
      else this.root.append(notice(`Something went wrong: ${error.message}`, "error", "error"));
    });
  }

  rejectKey(error) {
    this.keyStore.clear();
    this.render(error.message);
  }
}

new App(document.getElementById("app"), document.querySelector('[data-testid="forget-key"]')).start();
