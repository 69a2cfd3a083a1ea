// Rules: the rules in force; admins edit the rules file with validation.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, NotAvailable } from "/lib/ui.js";
import { api, tagged, NotFound, toast } from "/lib/api.js";
import { principal, reconnected, setFilter } from "/lib/stream.js";
import { FileEditor } from "/lib/fileedit.js";

export function Rules() {
  const [data, setData] = useState(null);
  const [state, setState] = useState("loading");
  const [editing, setEditing] = useState(false);
  const [reload, setReload] = useState(0);
  useEffect(() => setFilter({}), []); // nothing live but the alerts
  useEffect(() => {
    tagged("/api/v1/rules").then(({ data: d, tag }) => { setData({ ...d, tag }); setState("ok"); }, (e) => setState(e instanceof NotFound ? "na" : "error"));
  }, [reload, reconnected.value]);
  const admin = principal.value?.role === "admin";
  if (state === "na") return html`<h1>Rules</h1><${NotAvailable} what="Rules" />`;
  if (state !== "ok") return html`<h1>Rules</h1><p class="muted">${state === "error" ? "Could not load the rules." : "Loading…"}</p>`;
  const source = data.source ?? (data.rules || []).map((r) => r.text).join("\n");
  // Saved over the version the editor opened, or refused: another admin
  // may have saved the rules meanwhile, and putting this whole file back
  // would erase what they saved.
  const save = (text) => api("/api/v1/rules", { method: "PUT", body: text, type: "text/plain", ifMatch: data.tag });
  // Read again either way: a cancelled edit may have been refused as made
  // over rules that changed meanwhile, and the next one starts from them.
  const done = (saved) => {
    setEditing(false);
    setReload(reload + 1);
    if (saved) toast.value = "Rules saved.";
  };
  return html`
    <h1>Rules</h1>
    ${editing ? html`<${FileEditor} id="rules" what="rules" label="Rules file" initial=${source} save=${save} done=${done} />` : html`
    ${admin ? html`<p><button type="button" id="edit-rules" onClick=${() => setEditing(true)}>Edit rules</button></p>`
      : html`<p class="muted">Editing needs the admin role.</p>`}
    <div class="table-wrap"><table id="rules-table" class="reflow"><thead><tr><th>Name</th><th>Rule</th></tr></thead>
      <tbody>${[...(data.rules || []), ...(data.inhibits || [])].map((r) => html`<tr><td data-label="Name">${r.name}</td><td data-label="Rule"><pre>${r.text}</pre></td></tr>`)}</tbody></table></div>`}`;
}
