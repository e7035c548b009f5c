// Building the page from data. Every string from the server (labels, step ids, message
// text, outputs, UI dumps) enters the document as a text node or an attribute value,
// never as markup: the console never parses a string as HTML (a test holds every module to that).

export function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  add(node, children);
  return node;
}

// Appends children: nodes as they are, anything else as text.
export function add(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return add(node, children);
}

export function taskLink(id) {
  return el("a", { href: "#/task/" + encodeURIComponent(id), class: "task-link" }, id);
}

export function badge(text, kind) {
  return el("span", { class: "badge " + (kind || text) }, text);
}

// A time of the API (RFC 3339, UTC) as people read it, with the exact value on hover.
export function time(value) {
  if (!value) return el("span", { class: "muted" }, "—");
  const date = new Date(value);
  return el("time", { datetime: value, title: value }, date.toLocaleString());
}

export function ago(value) {
  if (!value) return "never";
  const seconds = Math.max(0, Math.round((Date.now() - new Date(value).getTime()) / 1000));
  if (seconds < 60) return seconds + " s ago";
  if (seconds < 3600) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}

export function duration(start, end) {
  if (!start || !end) return "";
  const ms = new Date(end).getTime() - new Date(start).getTime();
  return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + " s";
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function pairs(map) {
  return Object.entries(map || {}).map(([key, value]) => el("span", { class: "chip" }, key + "=" + value));
}

export function table(headings, rows, props) {
  return el(
    "table",
    props,
    el("thead", null, el("tr", null, headings.map((h) => el("th", null, h)))),
    el("tbody", null, rows),
  );
}

export function section(title, ...children) {
  return el("section", { class: "card" }, el("h2", null, title), children);
}
