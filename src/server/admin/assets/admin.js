// sentin8-cron admin pages: the session, the lists and the new-schedule form, built on
// admin-kit.js; admin-views.js (loaded before this file, which boots) adds the overview and the
// pages of one record. No dependencies and no inline code (the pages' Content-Security-Policy
// only allows this origin's files). Every piece of data is
// written with textContent or as text nodes, never parsed as markup. The bearer token and the
// chosen environment live in this tab's sessionStorage only.
'use strict';

(() => {
  const {
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
  } = sentin8AdminKit;
  // A refused token signs the page out (signOut is defined below; declarations are hoisted).
  hooks.unauthorized = signOut;

  // ---------------------------------------------------------------------------------------
  // Session: token and environment
  // ---------------------------------------------------------------------------------------

  function showSignIn() {
    $('sign-in').hidden = false;
    $('session').hidden = true;
    $('pick-env').hidden = true;
    $('content').hidden = true;
  }

  function signOut(message, kind) {
    stopOverview();
    storage.remove(TOKEN_KEY);
    storage.remove(ENV_KEY);
    session.token = null;
    session.env = null;
    session.grant = null;
    showSignIn();
    if (message) say(message, kind || 'info');
  }

  async function onSignIn(event) {
    event.preventDefault();
    const token = $('token').value.trim();
    if (!token) {
      say('Paste a bearer token first.', 'error');
      return;
    }
    session.token = token;
    storage.set(TOKEN_KEY, token);
    $('token').value = '';
    say('Signing in…');
    await loadGrant(true);
  }

  function granted(env) {
    const grant = session.grant;
    if (!grant || !env) return false;
    return grant.all ? UUID.test(env) : grant.envs.includes(env);
  }

  async function loadGrant(fresh) {
    let grant;
    try {
      grant = await api('GET', '/v1/admin/envs', { env: false });
    } catch (err) {
      if (err.status === 403) signOut(`This token may not use the admin pages: ${err.message}.`, 'error');
      else report(err);
      return;
    }
    session.grant = grant;
    $('sign-in').hidden = true;
    $('session').hidden = false;
    $('who').textContent = `${grant.subject}${grant.dev ? ' (dev)' : ''}${grant.can_write ? '' : ' · read-only'}`;
    setupEnvPicker();
    if (fresh) say(`Signed in as ${grant.subject}.`, 'ok');
    if (granted(session.env)) {
      start();
      return;
    }
    if (!grant.all && grant.envs.length === 1) {
      chooseEnv(grant.envs[0], false);
      return;
    }
    session.env = null;
    storage.remove(ENV_KEY);
    $('content').hidden = true;
    $('pick-env').hidden = false;
    $('pick-env-text').textContent = grant.all
      ? 'This token may use every environment: choose one that holds schedules above, or “Another environment” to paste the id (a UUID) of any other, then press “Use”.'
      : grant.envs.length
        ? 'Choose one of the environments this token grants.'
        : 'This token grants no environment.';
  }

  const OTHER_ENV = 'other';

  /** The environments to offer: those granted, or for an admin those that hold schedules. */
  function knownEnvs() {
    const grant = session.grant;
    if (!grant.all) return grant.envs.map((id) => ({ id, text: id }));
    return (grant.with_data || []).map((e) => ({
      id: e.env_id,
      text: `${e.env_id} · ${e.schedules} schedule${e.schedules === 1 ? '' : 's'}`,
    }));
  }

  function setupEnvPicker(typing) {
    const grant = session.grant;
    const known = knownEnvs();
    const select = $('env-select');
    const options = [h('option', { value: '' }, known.length || grant.all ? 'Choose…' : 'None granted'),
      ...known.map((env) => h('option', { value: env.id }, env.text))];
    if (grant.all) options.push(h('option', { value: OTHER_ENV }, 'Another environment (type its id)…'));
    select.replaceChildren(...options);
    const listed = known.some((env) => env.id === session.env);
    const typed = grant.all && (typing || (session.env && !listed));
    select.value = listed ? session.env : (typed ? OTHER_ENV : '');
    $('env-input-label').hidden = !typed;
    $('env-input').hidden = !typed;
    // The environment changes only on "Use": arrowing through the list must not switch it.
    $('env-use').hidden = false;
    if (typed && !typing) $('env-input').value = session.env || '';
  }

  /** Shows the id field for "Another environment"; choosing happens on "Use". */
  function onEnvSelect() {
    const other = $('env-select').value === OTHER_ENV;
    $('env-input-label').hidden = !other;
    $('env-input').hidden = !other;
  }

  function onEnvSubmit(event) {
    event.preventDefault();
    const typed = !$('env-input').hidden;
    const value = (typed ? $('env-input').value : $('env-select').value).trim();
    if (!UUID.test(value)) {
      say('An environment id is a UUID, e.g. 0191b6c2-7d1e-7c3a-9a52-3f0c2a9d4e10.', 'error');
      $('env-input').focus();
      return;
    }
    chooseEnv(value);
  }

  function chooseEnv(env, announce) {
    if (!env) return;
    session.env = env.toLowerCase();
    storage.set(ENV_KEY, session.env);
    setupEnvPicker();
    if (announce !== false) say(`Environment ${session.env}.`);
    start();
  }

  const started = new Set();

  function start() {
    $('pick-env').hidden = true;
    $('content').hidden = false;
    const init = PAGES[page];
    if (!init) return;
    const first = !started.has(page);
    started.add(page);
    Promise.resolve(init(first)).catch(report);
  }

  // ---------------------------------------------------------------------------------------
  // Schedules
  // ---------------------------------------------------------------------------------------

  let scheduleCursor = null;

  async function schedulesPage(first) {
    if (first) {
      const params = new URLSearchParams(window.location.search);
      if (params.get('status')) $('f-status').value = params.get('status');
      if (params.get('domain')) $('f-domain').value = params.get('domain');
      if (params.get('type')) $('f-search').value = params.get('type');
      if (params.get('labels')) $('f-labels').value = params.get('labels');
      $('filters').addEventListener('submit', (event) => {
        event.preventDefault();
        loadSchedules(false).catch(report);
      });
      $('more').addEventListener('click', () => loadSchedules(true).catch(report));
    }
    await loadSchedules(false);
  }

  async function loadSchedules(more) {
    const query = {
      status: $('f-status').value,
      domain: $('f-domain').value.trim(),
      type_contains: $('f-search').value.trim(),
      label_selector: $('f-labels').value.trim(),
      fires: 3,
      limit: 50,
    };
    if (more && scheduleCursor) query.cursor = scheduleCursor;
    const result = await api('GET', '/v1/admin/schedules', { query });
    fill('schedules-table', result.items.map((s) => scheduleRow(s, result.now)), more);
    scheduleCursor = result.next_cursor;
    $('more').hidden = !scheduleCursor;
  }

  function scheduleRow(s, now) {
    const name = `${s.domain}/${s.schedule_type}`;
    const timing = s.kind === 'cron'
      ? [h('code', {}, s.cron), h('div', { class: 'muted' }, s.timezone),
        s.description ? h('div', { class: 'words small' }, s.description) : null]
      : [h('span', {}, 'once at '), timeEl(s.run_at)];
    const fires = s.upcoming.length
      ? h('ol', { class: 'fires' }, s.upcoming.map((fire) =>
        h('li', {}, fireEl(fire), h('span', { class: 'muted' }, ` ${relative(fire.at, now)}`))))
      : h('span', { class: 'muted' }, 'none');
    const actions = h('div', { class: 'actions' });
    if (canWrite()) {
      if (s.status === 'active') {
        actions.append(actionButton('Pause', `Pause ${name}`, () => scheduleAction(s, 'pause', `Paused ${name}.`)));
      } else if (s.status === 'paused') {
        actions.append(actionButton('Resume', `Resume ${name}`, () => scheduleAction(s, 'resume', `Resumed ${name}.`)));
      }
      actions.append(actionButton('Trigger', `Trigger ${name} now`, async () => {
        const job = await api('POST', `/v1/schedules/${encodeURIComponent(s.id)}/trigger`);
        say(`Triggered ${name}: job ${short(job.id)} is ${job.status}.`, 'ok');
        await loadSchedules(false);
      }));
      actions.append(confirmButton('Delete', `Delete ${name}`, () => scheduleAction(s, 'delete', `Deleted ${name}.`)));
    }
    actions.append(h('a', { href: `${UI}/jobs?schedule_id=${encodeURIComponent(s.id)}` }, 'Jobs'));
    return h('tr', { 'data-schedule': s.id, 'data-type': s.schedule_type },
      cell('Schedule', h('a', { href: `${UI}/schedules/view?id=${encodeURIComponent(s.id)}` }, label(s.domain, s.schedule_type)),
        h('div', { class: 'muted mono', title: s.id }, short(s.id)),
        labelsEl(s.labels)),
      cell('Timing', ...timing),
      cell('Status', badge(s.status)),
      cell('Next fires', s.status === 'paused' && s.upcoming.length
        ? h('div', { class: 'muted' }, 'if resumed now:') : null, fires),
      cell('Actions', actions));
  }

  // A schedule's labels as `key=value` chips; nothing when it has none.
  function labelsEl(labels) {
    const pairs = Object.entries(labels || {});
    if (!pairs.length) return null;
    return h('div', { class: 'labels small' },
      ...pairs.map(([key, value]) => h('code', { class: 'label-chip' }, `${key}=${value}`)));
  }

  async function scheduleAction(s, action, done) {
    await api('POST', `/v1/schedules/${encodeURIComponent(s.id)}/${action}`);
    say(done, 'ok');
    await loadSchedules(false);
  }

  // ---------------------------------------------------------------------------------------
  // New schedule
  // ---------------------------------------------------------------------------------------

  const FORM_FIELDS = ['domain', 'schedule_type', 'base_url', 'cron', 'timezone', 'on_dst_gap',
    'on_dst_repeat', 'run_at', 'start_at', 'end_at', 'remaining_runs', 'max_jitter', 'catchup_window',
    'overlap', 'pause_on_failure', 'after_completion', 'exclude', 'payload', 'max_retries'];
  // What the preview checks and lists by: the timing, its bounds, its runs and its jitter.
  const TIMING_FIELDS = ['cron', 'timezone', 'on_dst_gap', 'on_dst_repeat', 'run_at', 'start_at',
    'end_at', 'remaining_runs', 'max_jitter', 'exclude'];
  let previewTimer = null;
  let previewSeq = 0;

  function kind() {
    return $('kind-once').checked ? 'once' : 'cron';
  }

  /** The form control an API field name belongs to. */
  function controlFor(field) {
    if (field === 'target_config' || field.startsWith('target_config.')) return 'base_url';
    if (field.startsWith('payload')) return 'payload';
    if (field.startsWith('exclude')) return 'exclude';
    return FORM_FIELDS.includes(field) ? field : null;
  }

  function clearErrors(fields) {
    for (const id of fields) {
      const error = $(`${id}-error`);
      error.textContent = '';
      error.hidden = true;
      $(id).removeAttribute('aria-invalid');
    }
  }

  /** Shows each problem under its field; returns those that belong to no field. */
  function showErrors(errors) {
    const unplaced = [];
    for (const problem of errors) {
      const id = controlFor(String(problem.field || ''));
      if (!id) {
        unplaced.push(problem);
        continue;
      }
      const error = $(`${id}-error`);
      const message = id === 'base_url' && problem.field !== 'target_config.baseUrl'
        ? `${problem.field}: ${problem.message}` : problem.message;
      error.textContent = error.textContent ? `${error.textContent}; ${message}` : message;
      error.hidden = false;
      $(id).setAttribute('aria-invalid', 'true');
    }
    return unplaced;
  }

  function newSchedulePage(first) {
    if (!first) {
      runPreview();
      return;
    }
    const toggle = () => {
      const once = kind() === 'once';
      $('cron-fields').hidden = once;
      $('once-fields').hidden = !once;
      $('cron-policy-fields').hidden = once;
      schedulePreview();
    };
    $('kind-cron').addEventListener('change', toggle);
    $('kind-once').addEventListener('change', toggle);
    for (const id of TIMING_FIELDS) {
      $(id).addEventListener('input', schedulePreview);
      $(id).addEventListener('change', schedulePreview);
    }
    $('new-schedule').addEventListener('submit', createSchedule);
    if (!canWrite()) {
      $('create').disabled = true;
      say('This token is read-only: you can preview expressions but not create schedules.', 'info');
    }
    toggle();
  }

  function schedulePreview() {
    clearTimeout(previewTimer);
    previewTimer = setTimeout(runPreview, 250);
  }

  async function runPreview() {
    const seq = ++previewSeq;
    const once = kind() === 'once';
    const area = $('preview');
    const text = once ? $('run_at').value.trim() : $('cron').value.trim();
    if (!text) {
      clearErrors(TIMING_FIELDS);
      area.replaceChildren(h('p', { class: 'muted' },
        once ? 'Type an instant to check it.' : 'Type an expression to see when it fires.'));
      return;
    }
    const query = once
      ? { run_at: text, max_jitter: $('max_jitter').value.trim() }
      : {
        cron: text,
        timezone: $('timezone').value.trim(),
        on_dst_gap: $('on_dst_gap').value,
        on_dst_repeat: $('on_dst_repeat').value,
        start_at: $('start_at').value.trim(),
        end_at: $('end_at').value.trim(),
        remaining_runs: $('remaining_runs').value.trim(),
        max_jitter: $('max_jitter').value.trim(),
        exclude: $('exclude').value.trim(),
        count: 5,
      };
    try {
      const preview = await api('GET', '/v1/admin/preview', { query });
      if (seq !== previewSeq) return;
      clearErrors(TIMING_FIELDS);
      const intro = preview.kind === 'cron'
        ? `Next ${preview.fires.length} fires, on the ${preview.timezone} clock` +
          (preview.fixed_time ? ':' : ' (an interval schedule: it follows elapsed time across clock changes):')
        : 'Runs once, at:';
      // A schedule not created yet has no id to seed its jitter: only the window is known.
      const jitter = preview.max_jitter && preview.max_jitter !== '0s'
        ? h('p', { class: 'muted', id: 'preview-jitter' }, `Each call comes up to ${preview.max_jitter} after its time, at an offset fixed by the schedule's id.`)
        : null;
      // replaceChildren would write a null as the text "null": pass only what there is.
      const parts = [h('p', {}, intro), h('ol', { class: 'fires', id: 'preview-fires' },
        preview.fires.map((fire) => h('li', {}, fireEl(fire),
          h('span', { class: 'muted' }, ` ${relative(fire.at, preview.now)}`))))];
      if (jitter) parts.push(jitter);
      area.replaceChildren(...parts);
    } catch (err) {
      if (seq !== previewSeq) return;
      if (err.status === 400) {
        clearErrors(TIMING_FIELDS);
        const errors = Array.isArray(err.problem.errors) ? err.problem.errors : [];
        showErrors(errors.map((e) => ({ ...e, field: controlFor(e.field) || e.field }))
          .filter((e) => TIMING_FIELDS.includes(e.field)));
        area.replaceChildren(h('p', { class: 'error', id: 'preview-error' }, `Not valid: ${err.message}`));
      } else {
        report(err);
      }
    }
  }

  async function createSchedule(event) {
    event.preventDefault();
    clearErrors(FORM_FIELDS);
    let payload;
    try {
      payload = JSON.parse($('payload').value.trim() || '{}');
    } catch (err) {
      showErrors([{ field: 'payload', message: `is not valid JSON (${err.message})` }]);
      say('The schedule was not created: the payload is not valid JSON.', 'error');
      $('payload').focus();
      return;
    }
    const body = {
      domain: $('domain').value.trim(),
      schedule_type: $('schedule_type').value.trim(),
      target_config: { baseUrl: $('base_url').value.trim() },
      payload,
    };
    const retries = $('max_retries').value.trim();
    if (retries !== '') {
      const n = Number(retries);
      if (!Number.isInteger(n) || n < 0) {
        showErrors([{ field: 'max_retries', message: 'must be a whole number from 0 to 100' }]);
        $('max_retries').focus();
        return;
      }
      body.max_retries = n;
    }
    // Policies left empty are left out: the server's defaults apply.
    const optional = (id) => {
      const value = $(id).value.trim();
      if (value) body[id] = value;
    };
    optional('max_jitter');
    optional('catchup_window');
    if ($('after_completion').checked) body.after_completion = 'delete';
    if (kind() === 'once') {
      body.run_at = $('run_at').value.trim();
    } else {
      body.cron = $('cron').value.trim();
      body.timezone = $('timezone').value.trim() || 'UTC';
      body.on_dst_gap = $('on_dst_gap').value;
      body.on_dst_repeat = $('on_dst_repeat').value;
      body.overlap = $('overlap').value;
      optional('start_at');
      optional('end_at');
      // Entries are separated by ';' (a cron-like spec holds commas).
      const exclude = $('exclude').value.split(';').map((e) => e.trim()).filter(Boolean);
      if (exclude.length) body.exclude = exclude;
      if ($('pause_on_failure').checked) body.pause_on_failure = true;
      const runs = $('remaining_runs').value.trim();
      if (runs !== '') {
        const n = Number(runs);
        if (!Number.isInteger(n) || n < 1) {
          showErrors([{ field: 'remaining_runs', message: 'must be a whole number from 1 to 1000000' }]);
          $('remaining_runs').focus();
          return;
        }
        body.remaining_runs = n;
      }
    }
    $('create').disabled = true;
    say('Creating…');
    try {
      const created = await api('POST', '/v1/schedules', { body });
      storage.set(FLASH_KEY, `Created ${created.domain}/${created.schedule_type}; next fire ${utc(created.next_run_at)}.`);
      window.location.assign(`${UI}/schedules`);
    } catch (err) {
      const errors = err.problem && Array.isArray(err.problem.errors) ? err.problem.errors : [];
      if (err.status === 400 && errors.length) {
        const unplaced = showErrors(errors);
        const rest = unplaced.map((e) => `${e.field}: ${e.message}`).join('; ');
        say(`The schedule was not created: ${rest || 'see the fields marked below.'}`, 'error');
        const firstInvalid = document.querySelector('[aria-invalid="true"]');
        if (firstInvalid) firstInvalid.focus();
      } else {
        report(err);
      }
    } finally {
      $('create').disabled = !canWrite();
    }
  }

  // ---------------------------------------------------------------------------------------
  // Jobs
  // ---------------------------------------------------------------------------------------

  let jobCursor = null;
  const scheduleNames = new Map();

  async function jobsPage(first) {
    if (first) {
      const params = new URLSearchParams(window.location.search);
      if (params.get('status')) $('f-status').value = params.get('status');
      $('filters').addEventListener('submit', (event) => {
        event.preventDefault();
        loadJobs(false).catch(report);
      });
      $('more').addEventListener('click', () => loadJobs(true).catch(report));
      await loadScheduleNames(params.get('schedule_id'));
    } else {
      await loadScheduleNames($('f-schedule').value);
    }
    await loadJobs(false);
  }

  async function loadScheduleNames(selected) {
    const result = await api('GET', '/v1/schedules', { query: { limit: 100 } });
    scheduleNames.clear();
    for (const s of result.items) scheduleNames.set(s.id, s);
    const select = $('f-schedule');
    const options = [h('option', { value: '' }, 'Any')];
    for (const s of result.items) {
      options.push(h('option', { value: s.id }, `${s.domain}/${s.schedule_type}`));
    }
    if (selected && UUID.test(selected) && !scheduleNames.has(selected)) {
      options.push(h('option', { value: selected }, `schedule ${short(selected)}`));
    }
    select.replaceChildren(...options);
    select.value = selected && UUID.test(selected) ? selected : '';
  }

  async function loadJobs(more) {
    const query = { status: $('f-status').value, schedule_id: $('f-schedule').value, limit: 50 };
    if (more && jobCursor) query.cursor = jobCursor;
    const result = await api('GET', '/v1/jobs', { query });
    fill('jobs-table', result.items.map(jobRow), more);
    jobCursor = result.next_cursor;
    $('more').hidden = !jobCursor;
  }

  function jobRow(job) {
    const s = scheduleNames.get(job.schedule_id);
    const name = s ? `${s.domain}/${s.schedule_type}` : `schedule ${short(job.schedule_id)}`;
    const actions = h('div', { class: 'actions' });
    if (canWrite() && job.status === 'failed') {
      actions.append(actionButton('Retry', `Retry job ${short(job.id)} of ${name}`, async () => {
        await api('POST', `/v1/jobs/${encodeURIComponent(job.id)}/retry`);
        say(`Job ${short(job.id)} of ${name} will be retried now.`, 'ok');
        await loadJobs(false);
      }));
    }
    return h('tr', { 'data-job': job.id },
      cell('Schedule', s ? label(s.domain, s.schedule_type) : h('span', { class: 'muted' }, name),
        h('div', { class: 'mono', title: job.id }, h('a', { href: `${UI}/jobs/view?id=${encodeURIComponent(job.id)}` }, `job ${short(job.id)}`))),
      cell('Status', jobBadge(job)),
      cell('Scheduled for', timeEl(job.scheduled_for)),
      cell('Attempts', job.attempt),
      cell('Finished', timeEl(job.finished_at)),
      cell('Error', job.error ? h('span', { class: 'error-text' }, job.error) : h('span', { class: 'muted' }, '—')),
      cell('Actions', actions));
  }

  // ---------------------------------------------------------------------------------------
  // Dead-letter queue
  // ---------------------------------------------------------------------------------------

  let dlqCursor = null;
  // A job's or a schedule's entries only, when the page was opened from one (?job_id=, ?schedule_id=).
  const dlqScope = {};

  async function dlqPage(first) {
    if (first) {
      const params = new URLSearchParams(window.location.search);
      for (const key of ['job_id', 'schedule_id']) {
        const value = params.get(key);
        if (value && UUID.test(value)) dlqScope[key] = value.toLowerCase();
      }
      $('filters').addEventListener('submit', (event) => {
        event.preventDefault();
        loadDlq(false).catch(report);
      });
      $('more').addEventListener('click', () => loadDlq(true).catch(report));
    }
    showDlqScope();
    await loadDlq(false);
  }

  function showDlqScope() {
    const scope = $('dlq-scope');
    const what = dlqScope.job_id ? `job ${short(dlqScope.job_id)}` : dlqScope.schedule_id ? `schedule ${short(dlqScope.schedule_id)}` : null;
    scope.hidden = !what;
    if (what) scope.replaceChildren(`Only the dead letters of ${what}. `, h('a', { href: `${UI}/dlq` }, 'Show every dead letter'));
  }

  async function loadDlq(more) {
    const query = { domain: $('f-domain').value.trim(), limit: 50, ...dlqScope };
    if (more && dlqCursor) query.cursor = dlqCursor;
    const result = await api('GET', '/v1/dlq', { query });
    fill('dlq-table', result.items.map(dlqRow), more);
    dlqCursor = result.next_cursor;
    $('more').hidden = !dlqCursor;
  }

  function dlqRow(entry) {
    const name = `${entry.domain}/${entry.schedule_type}`;
    const actions = h('div', { class: 'actions' });
    if (canWrite()) {
      actions.append(actionButton('Republish', `Republish the dead letter of ${name}`, async () => {
        const job = await api('POST', `/v1/dlq/${encodeURIComponent(entry.id)}/republish`);
        say(`Republished ${name}: job ${short(job.id)} is ${job.status}.`, 'ok');
        await loadDlq(false);
      }, 'primary'));
      // The same operation as `sentin8-cron dlq discard`: the occurrence will not run.
      actions.append(confirmButton('Discard', `Discard the dead letter of ${name}`, async () => {
        await api('DELETE', `/v1/dlq/${encodeURIComponent(entry.id)}`);
        say(`Discarded the dead letter of ${name}: job ${short(entry.job_id)} will not run.`, 'ok');
        await loadDlq(false);
      }));
    }
    actions.append(h('a', { href: `${UI}/jobs?schedule_id=${encodeURIComponent(entry.schedule_id)}` }, 'Jobs'));
    return h('tr', { 'data-dlq': entry.id, id: `dlq-${entry.id}` },
      cell('Schedule', h('a', { href: `${UI}/schedules/view?id=${encodeURIComponent(entry.schedule_id)}`, class: 'dlq-schedule' }, label(entry.domain, entry.schedule_type)),
        h('div', { class: 'mono', title: entry.job_id },
          h('a', { href: `${UI}/jobs/view?id=${encodeURIComponent(entry.job_id)}`, class: 'dlq-job' }, `job ${short(entry.job_id)}`))),
      cell('Scheduled for', timeEl(entry.scheduled_for), ...(entry.backfill ? [' ', h('span', { class: 'badge held', title: 'Backfilled by an operator: an old occurrence run on purpose.' }, 'backfill')] : [])),
      cell('Landed', timeEl(entry.landed_at)),
      cell('Attempts', entry.attempts),
      cell('Last error', h('span', { class: 'error-text' }, entry.last_error)),
      cell('Actions', actions));
  }

  // ---------------------------------------------------------------------------------------

  const { stopOverview, ...views } = sentin8AdminViews;
  const PAGES = {
    ...views,
    schedules: schedulesPage,
    'schedules/new': newSchedulePage,
    jobs: jobsPage,
    dlq: dlqPage,
  };

  function boot() {
    $('sign-in-form').addEventListener('submit', onSignIn);
    $('sign-out').addEventListener('click', () => signOut('Signed out.', 'info'));
    $('env-form').addEventListener('submit', onEnvSubmit);
    $('env-select').addEventListener('change', onEnvSelect);
    const flash = storage.get(FLASH_KEY);
    if (flash) {
      storage.remove(FLASH_KEY);
      say(flash, 'ok');
    }
    if (!session.token) {
      showSignIn();
      return;
    }
    loadGrant(false);
  }

  boot();
})();
