// DOM helpers. Untrusted text (anything from a session, a judge or the API) only ever goes into the
// page as a text node or an attribute value set through the DOM: never through innerHTML, so markup
// in a transcript is shown, not parsed.

/** Create an element: props are attributes (class, text, dataset, on* listeners); children are nodes or text. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

/** An SVG element (charts). */
export function s(tag, props = {}, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.setAttribute('class', value);
    else if (key === 'text') el.textContent = String(value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
}

export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function fmtTime(us) {
  if (!us) return '';
  const d = new Date(us / 1000);
  return d.toISOString().replace('T', ' ').slice(0, 16) + ' UTC';
}

export function truncate(text, n) {
  const t = String(text ?? '');
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
}
