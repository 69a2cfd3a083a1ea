// Apollo-11 dashboard: layout, routing, login, keyboard shortcuts.
import { render } from "/vendor/preact.mjs";
import { useEffect, useRef, useState } from "/vendor/preact-hooks.mjs";
import { signal } from "/vendor/signals.mjs";
import { html } from "/lib/ui.js";
import { needLogin, setToken, token, toast } from "/lib/api.js";
import { connect, conn, connDetail, connHint, principal } from "/lib/stream.js";
import { Board } from "/pages/board.js";
import { Overview } from "/pages/overview.js";
import { Tasks, TaskDetail } from "/pages/tasks.js";
import { Jobs } from "/pages/jobs.js";
import { Alerts } from "/pages/alerts.js";
import { Rules } from "/pages/rules.js";
import { Expectations } from "/pages/expectations.js";
import { System } from "/pages/system.js";

export const route = signal(location.pathname);
const showHelp = signal(false);

export function navigate(path) {
  if (path === location.pathname + location.search) return;
  history.pushState(null, "", path);
  route.value = location.pathname;
}
window.addEventListener("popstate", () => { route.value = location.pathname; });
// Internal links navigate without reloading the page.
document.addEventListener("click", (e) => {
  const a = e.target.closest?.("a[href^='/']");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || a.target) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});

const pages = [
  ["/", "Health", "h"], ["/overview", "Overview", "o"], ["/tasks", "Tasks", "t"], ["/jobs", "Jobs", "j"],
  ["/alerts", "Alerts", "a"], ["/rules", "Rules", "r"], ["/expectations", "Expectations", "e"], ["/system", "System", "s"],
];

function page(path) {
  const [, first, rest] = path.match(/^\/([^/]*)\/?(.*)$/) || [];
  switch (first) {
    case "": return html`<${Board} />`;
    case "overview": return html`<${Overview} />`;
    case "tasks": return rest ? html`<${TaskDetail} id=${decodeURIComponent(rest)} />` : html`<${Tasks} />`;
    case "jobs": return html`<${Jobs} name=${rest ? decodeURIComponent(rest) : ""} />`;
    case "alerts": return html`<${Alerts} />`;
    case "rules": return html`<${Rules} />`;
    case "expectations": return html`<${Expectations} />`;
    case "system": return html`<${System} />`;
    default: return html`<p>No such page. <a href="/">Job health</a></p>`;
  }
}

function Connection() {
  const label = { open: "Live", connecting: "Connecting", closed: "Disconnected", unauthorized: "Not signed in" }[conn.value];
  return html`<span class="conn" id="conn" data-state=${conn.value} role="status" aria-live="polite"
    title=${[connDetail.value, connHint.value].filter(Boolean).join(": ")}>${label}${connDetail.value ? html`<span class="muted hide-narrow"> — ${connDetail.value}</span>` : ""}</span>`;
}

// strayChar finds the first character of a pasted token that no token
// holds: a token goes in an HTTP header, which a browser refuses to send
// with anything but Latin-1 in it (so every request failed before it left,
// and the page said the server could not be reached), and tokens are
// printable ASCII. A zero-width space or a typographic quote comes along
// when a token is copied from a chat message or a document.
function strayChar(t) {
  const i = t.search(/[^\x21-\x7e]/);
  if (i < 0) return "";
  const code = t.codePointAt(i).toString(16).toUpperCase().padStart(4, "0");
  return `The token holds U+${code}, which no token holds, at character ${i + 1}: paste it again, or type it.`;
}

// signedIn starts over with the token now stored: the stream, and the
// pages, which read their data again.
function signedIn() {
  connect();
  route.value = location.pathname + " "; // re-render pages so they fetch again
  queueMicrotask(() => { route.value = location.pathname; });
}

// The token is the browser's, one for the site: signed in (or out) in
// another tab, this one follows, rather than showing one principal's
// identity and data while its requests go out with another's token.
window.addEventListener("storage", (e) => {
  if (e.storageArea !== localStorage || (e.key !== null && e.key !== "apollo.token")) return;
  needLogin.value = false;
  signedIn();
});

function Login() {
  const dlg = useRef(null);
  const [err, setErr] = useState("");
  const open = needLogin.value; // read while rendering: the dialog follows the signal
  useEffect(() => {
    const d = dlg.current;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  const submit = (e) => {
    e.preventDefault();
    const t = new FormData(e.target).get("token").trim();
    const stray = strayChar(t);
    setErr(stray);
    if (stray) return;
    setToken(t);
    signedIn();
  };
  return html`<dialog ref=${dlg} id="login" aria-labelledby="login-title" onCancel=${(e) => e.preventDefault()}>
    <form onSubmit=${submit}>
      <h2 id="login-title">Sign in</h2>
      <p class="muted">This server needs an API token (viewer, operator or admin). It is kept in this browser's local storage.</p>
      <label for="token-input">API token</label>
      <input id="token-input" name="token" type="password" autocomplete="current-password" required value=${token()}
        aria-describedby=${err ? "login-error" : undefined} aria-invalid=${err ? "true" : undefined} />
      ${err ? html`<p class="errors" id="login-error" role="alert">${err}</p>` : ""}
      <div class="row"><button class="primary" type="submit">Sign in</button></div>
    </form>
  </dialog>`;
}

function Help() {
  const dlg = useRef(null);
  const open = showHelp.value;
  useEffect(() => {
    const d = dlg.current;
    if (open && !d.open) d.showModal();
    if (!open && d.open) d.close();
  }, [open]);
  return html`<dialog ref=${dlg} id="help" aria-labelledby="help-title" onClose=${() => { showHelp.value = false; }}>
    <h2 id="help-title">Keyboard shortcuts</h2>
    <table><tbody>
      ${pages.map(([p, name, k]) => html`<tr><td><span class="kbd">g</span> <span class="kbd">${k}</span></td><td>${name}</td></tr>`)}
      <tr><td><span class="kbd">/</span></td><td>Focus the filter of the page</td></tr>
      <tr><td><span class="kbd">?</span></td><td>This help</td></tr>
      <tr><td><span class="kbd">Esc</span></td><td>Close a dialog</td></tr>
    </tbody></table>
    <form method="dialog"><button>Close</button></form>
  </dialog>`;
}

let pendingG = 0;
document.addEventListener("keydown", (e) => {
  const t = e.target;
  if (e.ctrlKey || e.metaKey || e.altKey || t.closest?.("input, textarea, select, dialog[open]")) return;
  if (e.key === "?") { showHelp.value = true; e.preventDefault(); return; }
  if (e.key === "/") {
    const f = document.querySelector("[data-filter]");
    if (f) { f.focus(); e.preventDefault(); }
    return;
  }
  if (e.key === "g") { pendingG = Date.now(); return; }
  if (Date.now() - pendingG < 1500) {
    const p = pages.find(([, , k]) => k === e.key);
    if (p) { navigate(p[0]); e.preventDefault(); }
    pendingG = 0;
  }
});

function Toast() {
  useEffect(() => {
    if (!toast.value) return;
    const t = setTimeout(() => { toast.value = ""; }, 5000);
    return () => clearTimeout(t);
  }, [toast.value]);
  return toast.value ? html`<div class="toast" role="alert">${toast.value}</div>` : null;
}

function App() {
  const path = route.value.trim();
  const first = "/" + (path.split("/")[1] || "");
  useEffect(() => { document.title = `${pages.find(([p]) => p === first)?.[1] || "Apollo-11"} · Apollo-11`; }, [first]);
  return html`
    <header class="top">
      <a class="brand" href="/">Apollo-11</a>
      <nav class="main" aria-label="Pages">
        ${pages.map(([p, name]) => html`<a href=${p} aria-current=${first === p ? "page" : undefined}>${name}</a>`)}
      </nav>
      <${Connection} />
      ${principal.value ? html`<span class="muted hide-narrow" id="who">${principal.value.name} (${principal.value.role})</span>` : ""}
      <button type="button" onClick=${() => { showHelp.value = true; }} aria-label="Keyboard shortcuts">?</button>
    </header>
    <main id="main">${route.value === path ? page(path) : null}</main>
    <${Login} /><${Help} /><${Toast} />`;
}

render(html`<${App} />`, document.getElementById("app"));
connect();
