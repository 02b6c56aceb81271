// A server-paged table: sortable by the columns that say so, filtered by a query the owner sets,
// rows expanding (click, Enter or Space) to a detail view of the record.
import { el, fmtJson, notice, replaceChildren } from "./dom.js";

const NEXT_SORT = { none: "desc", desc: "asc", asc: "none" };
const ARIA_SORT = { none: "none", desc: "descending", asc: "ascending" };

export class PagedTable {
  // columns: [{key, label, cell(item) -> string|Node, numeric?, sort?: "<server sort key>"}]
  // fetchPage(offset, limit, query) -> Promise<{total, items}>; query = {sort, ...filters}
  // detail(item) -> Node shown when a row expands (default: the record as JSON).
  constructor({ testid, rowTestid, columns, fetchPage, detail = null, pageSize = 50, emptyText }) {
    this.testid = testid;
    this.columns = columns;
    this.fetchPage = fetchPage;
    this.detail = detail ?? ((item) => el("pre", { class: "json", testid: `${rowTestid}-json` }, fmtJson(item)));
    this.pageSize = pageSize;
    this.rowTestid = rowTestid;
    this.emptyText = emptyText;
    this.offset = 0;
    this.filters = {};
    this.sort = { key: null, direction: "none" };
    this.loading = null;
    this.body = el("tbody");
    this.status = el("span", { class: "pager-status", testid: `${testid}-range`, "aria-live": "polite" });
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
    this.headers = columns.map((c) => this.header(c));
    this.element = el(
      "div",
      { class: "paged" },
      el(
        "div",
        { class: "table-wrap" },
        el("table", { class: "data clickable", testid }, el("thead", {}, el("tr", {}, this.headers)), this.body),
      ),
      this.message,
      el("div", { class: "pager" }, this.prev, this.status, this.next),
    );
  }

  header(column) {
    const cls = column.numeric ? "num" : null;
    if (!column.sort) return el("th", { class: cls, scope: "col" }, column.label);
    const th = el("th", { class: cls, scope: "col", "aria-sort": "none" });
    const button = el(
      "button",
      {
        type: "button",
        class: "sort-button",
        testid: `sort-${column.key}`,
        onclick: () => this.toggleSort(column),
      },
      column.label,
      el("span", { class: "sort-mark", "aria-hidden": "true" }, "↕"),
    );
    th.append(button);
    return th;
  }

  toggleSort(column) {
    const direction = this.sort.key === column.key ? NEXT_SORT[this.sort.direction] : "desc";
    this.sort = { key: direction === "none" ? null : column.key, direction };
    this.columns.forEach((c, i) => {
      const th = this.headers[i];
      if (!c.sort) return;
      const state = this.sort.key === c.key ? this.sort.direction : "none";
      th.setAttribute("aria-sort", ARIA_SORT[state]);
      th.querySelector(".sort-mark").textContent = state === "desc" ? "↓" : state === "asc" ? "↑" : "↕";
    });
    return this.turn(0);
  }

  query() {
    const column = this.columns.find((c) => c.key === this.sort.key);
    const sort = column ? (this.sort.direction === "desc" ? `-${column.sort}` : column.sort) : null;
    return { ...this.filters, sort };
  }

  setFilters(filters) {
    this.filters = filters;
    return this.turn(0);
  }

  async load(offset = 0) {
    this.offset = Math.max(0, offset);
    this.prev.disabled = true;
    this.next.disabled = true;
    const request = this.fetchPage(this.offset, this.pageSize, this.query());
    this.loading = request;
    const page = await request;
    if (this.loading === request) this.render(page);
    return page;
  }

  // A page or filter change the user asked for: a failure is shown under the table, the pager stays usable.
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

  // Live refresh: reload the page in place unless the user is reading an expanded row.
  async refresh() {
    if (this.body.querySelector('tr[aria-expanded="true"]')) return;
    try {
      await this.load(this.offset);
    } catch {
      // The next refresh tries again; the rows on screen stay.
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
    this.status.dataset.total = String(total);
    this.prev.disabled = this.offset === 0;
    this.next.disabled = this.offset + items.length >= total;
  }

  rows(item) {
    const detailCell = el("td", { colspan: this.columns.length });
    const detailRow = el("tr", { class: "detail", hidden: true }, detailCell);
    const toggle = () => {
      const opening = detailRow.hidden;
      if (opening && !detailCell.firstChild) detailCell.append(this.detail(item));
      detailRow.hidden = !opening;
      row.setAttribute("aria-expanded", String(opening));
    };
    const row = el(
      "tr",
      {
        testid: this.rowTestid,
        tabindex: 0,
        "aria-expanded": "false",
        onclick: (event) => (event.target.closest("a, button") ? null : toggle()),
        onkeydown: (event) => {
          if (event.target !== row || (event.key !== "Enter" && event.key !== " ")) return;
          event.preventDefault();
          toggle();
        },
      },
      this.columns.map((c) => el("td", { class: c.numeric ? "num" : null, "data-col": c.key ?? null }, c.cell(item))),
    );
    return [row, detailRow];
  }
}

// A plain (unpaged) table; rowClass(item) may tint a row.
export function simpleTable(testid, columns, items, rowTestid, { rowClass = () => null } = {}) {
  const head = el(
    "thead",
    {},
    el(
      "tr",
      {},
      columns.map((c) => el("th", { class: c.numeric ? "num" : null, scope: "col" }, c.label)),
    ),
  );
  const body = el(
    "tbody",
    {},
    items.map((item) =>
      el(
        "tr",
        { testid: rowTestid, class: rowClass(item) },
        columns.map((c) => el("td", { class: c.numeric ? "num" : null, "data-col": c.key ?? null }, c.cell(item))),
      ),
    ),
  );
  return el("div", { class: "table-wrap" }, el("table", { class: "data", testid }, head, body));
}

// Filter controls over a table: labelled selects whose change sets the table's filters.
export function filterBar(controls, onChange) {
  const selects = controls.map(({ name, label, options, testid }) => {
    const id = `filter-${name}-${Math.random().toString(36).slice(2, 8)}`;
    const select = el(
      "select",
      { id, testid, "data-filter": name },
      options.map(([value, text]) => el("option", { value }, text)),
    );
    select.addEventListener("change", () => onChange(current()));
    return { name, select, wrap: el("label", { class: "filter", for: id }, el("span", {}, label), select) };
  });
  const current = () => Object.fromEntries(selects.map(({ name, select }) => [name, select.value || null]));
  return el(
    "div",
    { class: "toolbar filters", role: "group", "aria-label": "Filters" },
    selects.map((s) => s.wrap),
  );
}
