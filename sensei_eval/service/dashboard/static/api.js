// The service's REST API. Errors become ApiError with the server's own message, so views can show them.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Optional bearer token for a service started with --token (kept in this browser's localStorage). */
function authHeaders() {
  const token = window.localStorage.getItem('sensei-eval-token');
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json', ...authHeaders() };
  // Writes always declare JSON (the service refuses any other type with 415, even without a body).
  if (body !== undefined || method !== 'GET') headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, `the scoring service did not answer (${e.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    let detail = data && (data.message || data.detail);
    if (detail && typeof detail !== 'string') detail = JSON.stringify(detail);
    if (response.status === 401) detail = `${detail || 'unauthorized'} (set a token: localStorage 'sensei-eval-token')`;
    throw new ApiError(response.status, `${method} ${path} failed: ${response.status} ${detail || response.statusText || text}`);
  }
  return { data, status: response.status };
}

export const getJSON = async (path) => (await api(path)).data;

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : '';
}
