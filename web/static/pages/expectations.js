// Expectations: what each job is expected to do (docs/expectations.md),
// the learner's proposals with one action to accept each, and for
// operators the file, edited with validation.
import { useEffect, useState } from "/vendor/preact-hooks.mjs";
import { html, NotAvailable } from "/lib/ui.js";
import { api, tagged, NotFound, toast } from "/lib/api.js";
import { principal, reconnected, setFilter } from "/lib/stream.js";
import { FileEditor, Problems, problemsOf } from "/lib/fileedit.js";

export function Expectations() {
  const [data, setData] = useState(null);
  const [proposals, setProposals] = useState([]);
  const [more, setMore] = useState(false);
  const [state, setState] = useState("loading");
  const [editing, setEditing] = useState(false);
  const [errors, setErrors] = useState([]);
  const [reload, setReload] = useState(0);
  useEffect(() => setFilter({}), []); // nothing live but the alerts
  useEffect(() => {
    Promise.all([tagged("/api/v1/expectations"), api("/api/v1/expectations/suggestions")]).then(([{ data: d, tag }, s]) => {
      setData({ ...d, tag }); setProposals(s.suggestions || []); setMore(!!s.more); setState("ok");
    }, (e) => setState(e instanceof NotFound || e?.body?.error?.code === "unavailable" ? "na" : "error"));
  }, [reload, reconnected.value]);
  const operator = ["operator", "admin"].includes(principal.value?.role);
  // Saved over the version the editor opened, or refused: a proposal
  // accepted, or another operator's save, meanwhile would be erased by
  // putting this whole file back. Read again when the editor closes.
  const save = (text) => api("/api/v1/expectations", { method: "PUT", body: text, type: "application/yaml", ifMatch: data.tag });
  const done = (saved) => {
    setEditing(false);
    setReload(reload + 1);
    if (saved) toast.value = "Expectations saved.";
  };
  const accept = async (job) => {
    try {
      await api(`/api/v1/expectations/suggestions/${encodeURIComponent(job)}/accept`, { method: "POST" });
      setErrors([]); setReload(reload + 1);
      toast.value = `The proposal for ${job} is now its expectation.`;
    } catch (x) { setErrors(problemsOf(x)); }
  };
  if (state === "na") return html`<h1>Expectations</h1><${NotAvailable} what="Job expectations" />`;
  if (state !== "ok") return html`<h1>Expectations</h1><p class="muted">${state === "error" ? "Could not load the expectations." : "Loading…"}</p>`;
  return html`
    <h1>Expectations</h1>
    <p class="muted">What each job should do: when it runs, how long it takes, what it waits for.
      A missed, too long, too short or too frequent run is recorded on the job and fires the rules that watch it.</p>
    ${editing ? html`<${FileEditor} id="expect" what="expectations" label="Expectations file (YAML)" initial=${data.source || ""} save=${save} done=${done} />` : html`
    <h2>In force <span class="muted">(${data.count} ${data.count === 1 ? "job" : "jobs"})</span></h2>
    ${operator ? html`<p><button type="button" id="edit-expectations" onClick=${() => setEditing(true)}>Edit expectations</button></p>`
      : html`<p class="muted">Editing needs the operator role.</p>`}
    ${data.source ? html`<pre class="panel" id="expect-source">${data.source}</pre>` : html`<p class="muted" id="expect-source">No expectations yet: accept a proposal below, or write the file.</p>`}
    <h2>Proposals</h2>
    <${Problems} id="accept-errors" problems=${errors} />
    ${proposals.length === 0 ? html`<p class="muted" id="no-proposals">No proposals: the learner proposes once a job has about 10 runs.</p>` : html`
    <div class="table-wrap"><table id="proposals" class="reflow"><thead><tr><th>Job</th><th>Proposal</th><th>Sure</th><th>Runs</th><th></th></tr></thead>
      <tbody>${proposals.map((p) => html`<tr>
        <td data-label="Job"><a href=${`/jobs/${encodeURIComponent(p.job)}`}>${p.job}</a></td>
        <td data-label="Proposal">${p.describe}<pre class="muted">${p.yaml}</pre></td>
        <td data-label="Sure">${Math.round((p.confidence || 0) * 100)}%</td>
        <td data-label="Runs">${p.runs}</td>
        <td>${operator ? html`<button type="button" class="accept" onClick=${() => accept(p.job)}>Accept</button>` : ""}</td>
      </tr>`)}</tbody></table></div>
    ${more ? html`<p class="muted" id="more-proposals">More jobs have proposals than the ${proposals.length} shown (the first by name): <code>apollo expect suggest JOB</code> shows any one.</p>` : ""}`}`}`;
}
