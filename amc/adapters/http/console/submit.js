// Submit: a task body as JSON; the server's validation errors shown beside the step they name.

import { call } from "./api.js";
import { el, replace } from "./dom.js";

const EXAMPLE = {
  plan: {
    steps: [
      { id: "open", action: "launch", args: { package: "com.android.settings" } },
      { id: "look", action: "screenshot", args: {} },
      { id: "tree", action: "ui_dump", args: {} },
    ],
  },
  labels: { from: "console" },
};

// [{id, where, node}] for every step of the body's plan, with the names a problem may use.
function stepsOf(body) {
  const plan = body && typeof body === "object" ? body.plan : null;
  const found = [];
  if (!plan || typeof plan !== "object") return found;
  const add = (steps, where) => {
    if (!Array.isArray(steps)) return;
    steps.forEach((step, index) => found.push({ step, where: `${where}[${index}]` }));
  };
  add(plan.steps, "plan.steps");
  if (Array.isArray(plan.stages)) plan.stages.forEach((stage, i) => add(stage && stage.steps, `plan.stages[${i}].steps`));
  return found;
}

// Which step a problem's detail names: "step 'open': ..." (the id quoted) or "plan.steps[2]: ...".
export function namedStep(detail, steps) {
  for (const entry of steps) {
    const id = entry.step && typeof entry.step.id === "string" ? entry.step.id : null;
    const names = [entry.where];
    if (id !== null) names.push(`step '${id}'`, `step "${id}"`);
    if (names.some((name) => detail.startsWith(name + ":") || detail.startsWith(name + " "))) return entry;
  }
  return null;
}

export function submitPage(main) {
  const editor = el("textarea", { id: "plan-editor", rows: 18, spellcheck: "false" }, JSON.stringify(EXAMPLE, null, 2));
  const error = el("p", { id: "submit-error", class: "error", role: "alert" });
  const preview = el("ol", { id: "plan-steps", class: "steps" });
  const form = el(
    "form",
    { id: "submit-form", class: "card" },
    el("label", { for: "plan-editor" }, "Task (JSON: plan, and optionally labels, requirements, priority, max_attempts)"),
    editor,
    el("button", { type: "submit", id: "submit-plan" }, "Submit"),
    error,
    el("h2", null, "Steps"),
    preview,
  );
  replace(main, el("h1", null, "Submit a task"), form);

  function show(body, problem) {
    const steps = stepsOf(body);
    const named = problem ? namedStep(problem, steps) : null;
    replace(
      preview,
      steps.map((entry) =>
        el(
          "li",
          { class: "step" + (entry === named ? " invalid" : ""), "data-step": entry.step && entry.step.id },
          el("strong", null, entry.step && entry.step.id !== undefined ? String(entry.step.id) : "(no id)"),
          el("span", { class: "muted" }, " " + (entry.step && entry.step.action ? String(entry.step.action) : "")),
          entry === named ? el("div", { class: "step-error error" }, problem) : "",
        ),
      ),
    );
    error.textContent = problem && !named ? problem : problem ? "The server refused a step: see below." : "";
  }

  function parse() {
    try {
      return JSON.parse(editor.value);
    } catch (problem) {
      error.textContent = "Not JSON: " + problem.message;
      return undefined;
    }
  }

  editor.addEventListener("input", () => {
    const body = parse();
    if (body !== undefined) show(body, null);
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = parse();
    if (body === undefined) return;
    const answer = await call("/v1/tasks", { method: "POST", body });
    if (answer.ok) {
      location.hash = "#/task/" + encodeURIComponent(answer.data.id);
      return;
    }
    show(body, (answer.data && answer.data.detail) || `The server answered ${answer.status}.`);
  });
  show(EXAMPLE, null);
  return { refresh: async () => {}, task: () => false };
}
