// A paged table whose rows expand to show the full record as JSON.
import { el, fmtJson, notice, replaceChildren } from "./dom.js";

export class PagedTable {
  // columns: [{label, cell(item) -> string|Node, numeric?}]
  // fetchPage(offset, limit) -> Promise<{total, items}>
  constructor({ testid, rowTestid, columns, fetchPage, detail = (item) => item, pageSize = 50, emptyText }) {
    this.columns = columns;
    this.fetchPage = fetchPage;
    this.detail = detail;
    this.pageSize = pageSize;
    this.rowTestid = rowTestid;
    this.emptyText = emptyText;
    this.offset = 0;
    this.body = el("tbody");
    this.status = el("span", { class: "pager-status", testid: `${testid}-range` });
    this.prev = el(
      "button",
      { type: "button", testid: `${testid}-prev`, onclick: () => this.turn(this.offset - this.pageSize) },
      "‹ Prev",
    );
    this.next = el(
      "button",
      { type: "button", testid: `${testid}-next`, onclick: () => this.turn(this.offset + this.pageSize) },
      "Next ›",
    );
    this.message = el("div");
    const head = el(
      "thead",
      {},
      el(
        "tr",
        {},
        columns.map((c) => el("th", { class: c.numeric ? "num" : null }, c.label)),
      ),
    );
    this.element = el(
      "div",
      { class: "paged" },
      el("div", { class: "table-wrap" }, el("table", { class: "data clickable", testid }, head, this.body)),
      this.message,
      el("div", { class: "pager" }, this.prev, this.status, this.next),
    );
  }

  async load(offset = 0) {
    this.offset = Math.max(0, offset);
    this.prev.disabled = true;
    this.next.disabled = true;
    const page = await this.fetchPage(this.offset, this.pageSize);
    this.render(page);
    return page;
  }

  // A page turn the user asked for: a failure is shown under the table, the pager stays usable.
  async turn(offset) {
    const previous = this.offset;
    try {
      await this.load(offset);
    } catch (error) {
      this.offset = previous;
      replaceChildren(this.message, notice(`Could not load this page: ${error.message}`, "error", "error"));
      this.prev.disabled = previous === 0;
      this.next.disabled = false;
    }
  }

  render({ total, items }) {
    replaceChildren(
      this.body,
      items.map((item) => this.rows(item)),
    );
    replaceChildren(this.message, items.length === 0 ? notice(this.emptyText, "empty") : null);
    const first = items.length ? this.offset + 1 : 0;
    this.status.textContent = `${first}-${this.offset + items.length} of ${total}`;
    this.prev.disabled = this.offset === 0;
    this.next.disabled = this.offset + items.length >= total;
  }

  rows(item) {
    const detailCell = el(
      "td",
      { colspan: this.columns.length },
      el("pre", { class: "json", testid: `${this.rowTestid}-json` }),
    );
    const detailRow = el("tr", { class: "detail", hidden: true }, detailCell);
    const toggle = () => {
      const opening = detailRow.hidden;
      if (opening && !detailCell.firstChild.textContent) detailCell.firstChild.textContent = fmtJson(this.detail(item));
      detailRow.hidden = !opening;
      row.setAttribute("aria-expanded", String(opening));
    };
    const row = el(
      "tr",
      {
        testid: this.rowTestid,
        tabindex: 0,
        "aria-expanded": "false",
        onclick: toggle,
        onkeydown: (e) => (e.key === "Enter" ? toggle() : null),
      },
      this.columns.map((c) => el("td", { class: c.numeric ? "num" : null, "data-col": c.key ?? null }, c.cell(item))),
    );
    return [row, detailRow];
  }
}

// A plain (unpaged) table.
export function simpleTable(testid, columns, items, rowTestid) {
  const head = el(
    "thead",
    {},
    el(
      "tr",
      {},
      columns.map((c) => el("th", { class: c.numeric ? "num" : null }, c.label)),
    ),
  );
  const body = el(
    "tbody",
    {},
    items.map((item) =>
      el(
        "tr",
        { testid: rowTestid },
        columns.map((c) => el("td", { class: c.numeric ? "num" : null, "data-col": c.key ?? null }, c.cell(item))),
      ),
    ),
  );
  return el("div", { class: "table-wrap" }, el("table", { class: "data", testid }, head, body));
}
