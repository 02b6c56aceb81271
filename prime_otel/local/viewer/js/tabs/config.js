// Config tab: the launched configuration file verbatim, else the stored config document.
import { el, fmtJson, notice } from "../dom.js";

function configSource(run) {
  const candidates = [run.config_source, run.metadata?.config_source, run.run_config?.config_source];
  return candidates.find((c) => c && typeof c === "object" && typeof c.text === "string") ?? null;
}

function configDocument(run) {
  const doc = run.kind === "train" ? run.run_config : run.metadata;
  return doc ?? run.run_config ?? run.metadata ?? null;
}

export class ConfigTab {
  constructor(run) {
    this.run = run;
  }

  mount(panel) {
    const source = configSource(this.run);
    const doc = configDocument(this.run);
    if (source) {
      panel.append(
        el(
          "div",
          { class: "file-head" },
          el("span", { class: "filename", testid: "config-filename" }, source.filename ?? "(unnamed file)"),
          el("span", { class: "badge format", testid: "config-format" }, source.format ?? "text"),
        ),
        el("pre", { class: "source", testid: "config-source" }, source.text),
      );
      if (doc) {
        panel.append(
          el(
            "details",
            { class: "more" },
            el("summary", {}, "Stored config document (JSON)"),
            el("pre", { class: "json", testid: "config-json" }, fmtJson(doc)),
          ),
        );
      }
      return;
    }
    if (doc === null) {
      panel.append(notice("This run was created without a config.", "empty"));
      return;
    }
    panel.append(
      notice("No launched file was recorded; this is the config document the run was created with.", "config-note"),
      el("pre", { class: "json", testid: "config-json" }, fmtJson(doc)),
    );
  }
}
