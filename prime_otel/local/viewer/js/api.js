// Client of the local platform's inspection API (/_local/...), same origin only.

export class UnauthorizedError extends Error {}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function errorMessage(response) {
  try {
    const body = await response.json();
    if (typeof body?.detail === "string") return body.detail;
    if (typeof body?.error?.message === "string") return body.error.message;
  } catch {
    // Not JSON: fall through to the status line.
  }
  return `HTTP ${response.status}`;
}

// Paged endpoints answer {total, items}; a bare list is accepted too.
function asPage(body) {
  if (Array.isArray(body)) return { total: body.length, items: body };
  const items = Array.isArray(body?.items) ? body.items : [];
  const total = Number.isFinite(Number(body?.total)) ? Number(body.total) : items.length;
  return { total, items };
}

function asList(body) {
  if (Array.isArray(body)) return body;
  if (Array.isArray(body?.items)) return body.items;
  if (Array.isArray(body?.data)) return body.data;
  return [];
}

export class ApiClient {
  constructor(keyStore) {
    this.keyStore = keyStore;
  }

  async get(path, params = {}) {
    const url = new URL(path, window.location.origin);
    for (const [name, value] of Object.entries(params)) {
      if (value !== null && value !== undefined && value !== "") url.searchParams.set(name, String(value));
    }
    const response = await fetch(url, {
      headers: { Authorization: `Bearer ${this.keyStore.get() ?? ""}`, Accept: "application/json" },
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) throw new UnauthorizedError("The server rejected this API key.");
    if (!response.ok) throw new ApiError(response.status, await errorMessage(response));
    return response.json();
  }

  runPath(id) {
    return `/_local/runs/${encodeURIComponent(id)}`;
  }

  async runs() {
    return asList(await this.get("/_local/runs", { extended: true }));
  }

  run(id) {
    return this.get(this.runPath(id));
  }

  stats(id) {
    return this.get(`${this.runPath(id)}/stats`);
  }

  // query: {sort: "reward"|"-reward", outcome: "ok"|"error", environment: <id>}; unset keys are left out.
  async samples(id, offset, limit, query = {}) {
    return asPage(await this.get(`${this.runPath(id)}/samples`, { offset, limit, ...query }));
  }

  async episodes(id, offset, limit, query = {}) {
    return asPage(await this.get(`${this.runPath(id)}/episodes`, { offset, limit, ...query }));
  }

  episode(id, recordId) {
    return this.get(`${this.runPath(id)}/episodes/${encodeURIComponent(recordId)}`);
  }

  async steps(id) {
    return asList(await this.get(`${this.runPath(id)}/steps`));
  }

  async stepRows(id, step, offset, limit) {
    const path = `${this.runPath(id)}/steps/${encodeURIComponent(step)}/rows`;
    return asPage(await this.get(path, { offset, limit }));
  }
}
