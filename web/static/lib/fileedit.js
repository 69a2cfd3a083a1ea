// A whole file the server validates (rules, expectations): edited in a
// text area, saved in one request, refused with every problem at its line
// and column; nothing changes until it is valid.
import { useState } from "/vendor/preact-hooks.mjs";
import { html } from "/lib/ui.js";
import { APIError } from "/lib/api.js";

// problemsOf is what a refused request says went wrong: the file's
// problems with their places (a 400 with errors), else its message and
// what to do (the file changed meanwhile: read it again).
export function problemsOf(x) {
  if (x instanceof APIError && x.status === 400 && x.body?.errors?.length) return x.body.errors;
  const hint = x instanceof APIError ? x.body?.error?.hint : "";
  return [{ message: hint ? `${x.message}: ${hint}` : x.message }];
}

// Problems lists problems, each with its line and column when it has one.
export function Problems({ id, problems }) {
  return html`<ul id=${id} class="errors" role="alert">${problems.map((x) => html`<li>${x.line ? `line ${x.line}:${x.col || 1}: ` : ""}${x.message}</li>`)}</ul>`;
}

// FileEditor edits initial; save(text) sends it and throws the server's
// refusal; done() is called once it is saved or the edit is cancelled.
// Its elements are #ID-text and #ID-errors.
export function FileEditor({ id, what, label, initial, save, done }) {
  const [text, setText] = useState(initial);
  const [problems, setProblems] = useState([]);
  const submit = async (e) => {
    e.preventDefault();
    try {
      await save(text);
      done(true);
    } catch (x) { setProblems(problemsOf(x)); }
  };
  return html`<form onSubmit=${submit} class="panel" aria-label=${`Edit ${what}`}>
    <label for=${`${id}-text`}>${label}</label>
    <textarea id=${`${id}-text`} rows="18" spellcheck="false" value=${text} onInput=${(e) => setText(e.target.value)}
      aria-invalid=${problems.length > 0} aria-describedby=${`${id}-errors`}></textarea>
    <${Problems} id=${`${id}-errors`} problems=${problems} />
    <div class="row"><button class="primary" type="submit">Validate and save</button>
      <button type="button" onClick=${() => done(false)}>Cancel</button></div>
  </form>`;
}
