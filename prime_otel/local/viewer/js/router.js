// Routes: #/runs, #/runs/<id>, #/runs/<id>/<tab>, #/runs/<id>/episodes/<episode id>. Without a
// hash route the path is read instead, so the server's viewer_url form /runs/<id> opens the same page.

function segmentsOf(path) {
  return path
    .split("/")
    .filter((part) => part !== "")
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return part;
      }
    });
}

export function currentRoute() {
  const hash = window.location.hash.replace(/^#/, "");
  const parts = segmentsOf(hash.startsWith("/") ? hash : window.location.pathname);
  if (parts[0] === "runs" && parts.length >= 2) {
    return { name: "run", id: parts[1], tab: parts[2] ?? null, item: parts[3] ?? null };
  }
  return { name: "runs" };
}
