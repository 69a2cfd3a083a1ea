// Rules: the rules in force; admins edit the rules file with validation.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, NotAvailable } from "/lib/ui.js";
import { api, NotFound, APIError, toast } from "/lib/api.js";
import { principal } from "/lib/stream.js";

export function Rules() {
  const [data, setData] = useState(null);
  const [state, setState] = useState("loading");
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState("");
  const [errors, setErrors] = useState([]);
  const [reload, setReload] = useState(0);
  useEffect(() => {
    api("/api/v1/rules").then((d) => { setData(d); setState("ok"); }, (e) => setState(e instanceof NotFound ? "na" : "error"));
  }, [reload]);
  const admin = principal.value?.role === "admin";
  const save = async (e) => {
    e.preventDefault();
    try {
      await api("/api/v1/rules", { method: "PUT", body: text, type: "text/plain" });
      setErrors([]); setEditing(false); setReload(reload + 1);
      toast.value = "Rules saved.";
    } catch (x) {
      if (x instanceof APIError && x.status === 400) {
        setErrors(x.body?.errors?.length ? x.body.errors : [{ message: x.message }]);
      } else setErrors([{ message: x.message }]);
    }
  };
  if (state === "na") return html`<h1>Rules</h1><${NotAvailable} what="Rules" />`;
  if (state !== "ok") return html`<h1>Rules</h1><p class="muted">${state === "error" ? "Could not load the rules." : "Loading…"}</p>`;
  const source = data.source ?? (data.rules || []).map((r) => r.text).join("\n");
  return html`
    <h1>Rules</h1>
    ${editing ? html`<form onSubmit=${save} class="panel" aria-label="Edit rules">
      <label for="rules-text">Rules file</label>
      <textarea id="rules-text" rows="18" spellcheck="false" value=${text} onInput=${(e) => setText(e.target.value)}
        aria-invalid=${errors.length > 0} aria-describedby="rules-errors"></textarea>
      <ul id="rules-errors" class="errors" role="alert">${errors.map((x) => html`<li>${x.line ? `line ${x.line}:${x.col || 1}: ` : ""}${x.message}</li>`)}</ul>
      <div class="row"><button class="primary" type="submit">Validate and save</button>
        <button type="button" onClick=${() => { setEditing(false); setErrors([]); }}>Cancel</button></div>
    </form>` : html`
    ${admin ? html`<p><button type="button" id="edit-rules" onClick=${() => { setText(source); setEditing(true); }}>Edit rules</button></p>`
      : html`<p class="muted">Editing needs the admin role.</p>`}
    <div class="table-wrap"><table id="rules-table" class="reflow"><thead><tr><th>Name</th><th>Rule</th></tr></thead>
      <tbody>${(data.rules || []).map((r) => html`<tr><td data-label="Name">${r.name}</td><td data-label="Rule"><pre>${r.text}</pre></td></tr>`)}</tbody></table></div>`}`;
}
