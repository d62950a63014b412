// sentin8-cron admin pages: the shared kit (session storage, the API client, element builders
// and formatting) that admin.js builds the pages with. No dependencies and no inline code; data
// is written with textContent or as text nodes, never parsed as markup.
'use strict';

const sentin8AdminKit = (() => {
  /** What the pages plug in: `unauthorized(message, kind)` signs out after a refused token. */
  const hooks = { unauthorized: () => {} };

  const TOKEN_KEY = 'sentin8-cron.admin.token';
  const ENV_KEY = 'sentin8-cron.admin.env';
  const FLASH_KEY = 'sentin8-cron.admin.flash';
  const UI = '/v1/admin/ui';
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  const $ = (id) => document.getElementById(id);
  const page = document.body.dataset.page;

  const storage = {
    get(key) {
      try { return sessionStorage.getItem(key); } catch (_) { return null; }
    },
    set(key, value) {
      try { sessionStorage.setItem(key, value); } catch (_) { /* private mode: this page only */ }
    },
    remove(key) {
      try { sessionStorage.removeItem(key); } catch (_) { /* nothing stored */ }
    },
  };

  const session = { token: storage.get(TOKEN_KEY), env: storage.get(ENV_KEY), grant: null };

  // ---------------------------------------------------------------------------------------
  // Small helpers
  // ---------------------------------------------------------------------------------------

  /** Builds an element; children are nodes or text (never markup). */
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === 'class') el.className = value;
      else if (key === 'onclick') el.addEventListener('click', value);
      else el.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : String(child));
    }
    return el;
  }

  class ApiError extends Error {
    constructor(status, problem) {
      super(problemText(status, problem));
      this.status = status;
      this.problem = problem || {};
    }
  }

  function problemText(status, problem) {
    if (problem && typeof problem === 'object') {
      const errors = Array.isArray(problem.errors) ? problem.errors : [];
      if (errors.length > 1) {
        return errors.map((e) => `${e.field}: ${e.message}`).join('; ');
      }
      if (problem.detail) return problem.detail;
      if (problem.title) return problem.title;
    }
    return status ? `The server answered ${status}.` : 'The server could not be reached.';
  }

  /** Calls the API with the session's token; adds target_env_id unless told not to. */
  async function api(method, path, options) {
    const { query = {}, body, env = true } = options || {};
    const url = new URL(path, window.location.origin);
    if (env) url.searchParams.set('target_env_id', session.env || '');
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== '') url.searchParams.set(key, value);
    }
    const init = {
      method,
      headers: { Authorization: `Bearer ${session.token}`, Accept: 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
    };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (_) {
      throw new ApiError(0, null);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = { detail: text };
    }
    if (response.status === 401) {
      hooks.unauthorized('The token was refused (expired or not valid here). Sign in again.', 'error');
      throw new ApiError(401, data);
    }
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  function say(text, kind) {
    const status = $('status');
    status.textContent = text;
    status.className = `status ${kind || 'info'}`;
  }

  function report(err) {
    if (err instanceof ApiError && err.status === 401) return; // already signed out
    say(err && err.message ? err.message : String(err), 'error');
  }

  function utc(iso) {
    if (!iso) return '—';
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return String(iso);
    return date.toISOString().replace('T', ' ').replace(/:\d\d\.\d{3}Z$/, ' UTC');
  }

  function timeEl(iso) {
    if (!iso) return '—';
    return h('time', { datetime: iso, title: iso }, utc(iso));
  }

  /** "in 2 h 5 min" / "3 min ago", measured against the server's clock. */
  function relative(iso, nowIso) {
    const seconds = Math.round((Date.parse(iso) - Date.parse(nowIso)) / 1000);
    if (Number.isNaN(seconds)) return '';
    const abs = Math.abs(seconds);
    let text;
    if (abs < 60) text = `${abs} s`;
    else if (abs < 3600) text = `${Math.round(abs / 60)} min`;
    else if (abs < 2 * 86400) {
      const hours = Math.floor(abs / 3600);
      const minutes = Math.round((abs % 3600) / 60);
      text = minutes ? `${hours} h ${minutes} min` : `${hours} h`;
    } else text = `${Math.round(abs / 86400)} days`;
    return seconds >= 0 ? `in ${text}` : `${text} ago`;
  }

  /** One fire: its wall time in the schedule's zone, with the DST note when there is one. */
  /** A fire's call; a jittered one says how long after its occurrence it comes. */
  function fireEl(fire) {
    const late = fire.occurrence ? Date.parse(fire.at) - Date.parse(fire.occurrence) : 0;
    return h('span', { class: 'fire' },
      h('time', { datetime: fire.at, title: `${fire.local} (${fire.at})` }, fire.display),
      fire.dst ? h('span', { class: 'tag', title: fire.dst === 'shifted'
        ? 'Moved out of a daylight-saving gap'
        : 'Second run in a daylight-saving fold' }, fire.dst) : null,
      late > 0 ? h('span', { class: 'tag jitter', title: `Jitter: the call for ${utc(fire.occurrence)} comes ${(late / 1000).toFixed(3)} s after it` },
        `+${(late / 1000).toFixed(late % 1000 ? 1 : 0)} s`) : null,
      fire.excluded ? h('span', { class: 'tag excluded', title: `Excluded by ${fire.excluded}: recorded as skipped, not called` },
        `excluded: ${fire.excluded}`) : null);
  }

  function badge(status) {
    return h('span', { class: `badge ${status}` }, status);
  }

  /**
   * A job's status badge; a pending job its paused schedule holds (`held_by_pause`) says so,
   * since nothing runs it until the schedule is resumed.
   */
  function jobBadge(job) {
    const marks = [];
    if (job.held_by_pause) {
      marks.push(h('span', { class: 'badge held', title: 'Its schedule is paused: it runs once the schedule is resumed.' }, 'held by pause'));
    }
    if (job.backfill) {
      marks.push(h('span', { class: 'badge held', title: 'Backfilled by an operator: it runs its occurrence late on purpose, and the lateness figures leave it out.' }, 'backfill'));
    }
    if (!marks.length) return badge(job.status);
    return h('span', { class: 'badges' }, badge(job.status), ...marks.flatMap((mark) => [' ', mark]));
  }

  /** The random end of an id (a time-ordered id's start is the same for a whole day). */
  function short(id) {
    return `…${String(id).slice(-8)}`;
  }

  function label(domain, scheduleType) {
    return h('span', { class: 'label' },
      h('strong', {}, scheduleType || '(unknown schedule)'),
      domain ? h('span', { class: 'muted' }, ` ${domain}`) : null);
  }

  function cell(name, ...content) {
    return h('td', { 'data-label': name }, h('div', {}, ...content));
  }

  function fill(tableId, rows, append) {
    const body = $(tableId).tBodies[0];
    if (append) body.append(...rows);
    else body.replaceChildren(...rows);
    $(`${tableId}-empty`).hidden = body.rows.length > 0;
  }

  function canWrite() {
    return Boolean(session.grant && session.grant.can_write);
  }

  /** A button that runs an action once at a time and reports its outcome. */
  function actionButton(text, ariaLabel, run, kind) {
    const button = h('button', { type: 'button', class: kind || 'secondary', 'aria-label': ariaLabel }, text);
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        await run();
      } catch (err) {
        report(err);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }

  /** Delete asks for a second click (no modal dialog), then runs. */
  function confirmButton(text, ariaLabel, run) {
    const button = h('button', { type: 'button', class: 'danger', 'aria-label': ariaLabel }, text);
    let armed = false;
    let timer = null;
    button.addEventListener('click', async () => {
      if (!armed) {
        armed = true;
        button.textContent = 'Confirm';
        button.setAttribute('aria-label', `Confirm: ${ariaLabel}`);
        say(`Press “Confirm” to ${ariaLabel.charAt(0).toLowerCase()}${ariaLabel.slice(1)}.`, 'info');
        timer = setTimeout(() => {
          armed = false;
          button.textContent = text;
          button.setAttribute('aria-label', ariaLabel);
        }, 6000);
        return;
      }
      clearTimeout(timer);
      button.disabled = true;
      try {
        await run();
      } catch (err) {
        report(err);
        button.disabled = false;
      }
    });
    return button;
  }

  return {
    hooks,
    $,
    TOKEN_KEY,
    ENV_KEY,
    FLASH_KEY,
    UI,
    UUID,
    page,
    storage,
    session,
    h,
    ApiError,
    problemText,
    api,
    say,
    report,
    utc,
    timeEl,
    relative,
    fireEl,
    badge,
    jobBadge,
    short,
    label,
    cell,
    fill,
    canWrite,
    actionButton,
    confirmButton,
  };
})();
