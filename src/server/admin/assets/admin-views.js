// sentin8-cron admin pages: the overview (which keeps itself current), a schedule's page and a
// job's page, built on admin-kit.js and admin-chart.js; admin.js registers them and boots.
// Data is written as text, never parsed as markup. Fields another server version may not
// send yet (a job's attempts, its successor, the audit trail) are shown when present.
'use strict';

const sentin8AdminViews = (() => {
  const {
    $, UI, UUID, FLASH_KEY, storage, session, h, api, say, report, utc, timeEl, relative, fireEl,
    badge, jobBadge, short, label, cell, fill, canWrite, actionButton, confirmButton,
  } = sentin8AdminKit;
  const { runsChart, duration } = sentin8AdminChart;

  /** How often the overview's counts refresh themselves, and its chart (a heavier read). */
  const REFRESH_MS = 5000;
  const CHART_MS = 60000;

  const errorText = (text) => (text
    ? h('span', { class: 'error-text' }, text) : h('span', { class: 'muted' }, '—'));
  const jobLink = (id, text) => h('a', { href: `${UI}/jobs/view?id=${encodeURIComponent(id)}` }, text || `job ${short(id)}`);
  const scheduleLink = (id, text) => h('a', { href: `${UI}/schedules/view?id=${encodeURIComponent(id)}` }, text);
  const fact = (name, ...value) => [h('dt', {}, name), h('dd', {}, ...value)];
  const idParam = () => {
    const id = new URLSearchParams(window.location.search).get('id');
    return id && UUID.test(id) ? id.toLowerCase() : null;
  };

  // ---------------------------------------------------------------------------------------
  // Overview
  // ---------------------------------------------------------------------------------------

  // runs: the last chart answer, with its window and when it was read; okAt: the last answer.
  const live = { timer: null, paused: false, seq: 0, runs: null, okAt: null, shown: {} };

  /** Stops refreshing (on sign-out); the next overview page starts again. */
  function stopOverview() {
    clearTimeout(live.timer);
    live.timer = null;
    live.seq += 1;
  }

  async function overviewPage(first) {
    if (first) {
      $('ov-pause').addEventListener('click', () => {
        live.paused = !live.paused;
        $('ov-pause').setAttribute('aria-pressed', String(live.paused));
        $('ov-pause').textContent = live.paused ? 'Resume updates' : 'Pause updates';
        if (live.paused) {
          clearTimeout(live.timer);
          $('ov-updated').textContent = 'Updates paused.';
        } else {
          refreshOverview().catch(report);
        }
      });
      $('ov-window').addEventListener('change', () => refreshOverview().catch(report));
      // A hidden tab stops asking; it catches up as soon as it is shown again.
      document.addEventListener('visibilitychange', () => {
        if (!document.hidden && !live.paused && session.token && $('ov-pause')) {
          refreshOverview().catch(report);
        }
      });
    }
    live.runs = null;
    live.shown = {};
    await refreshOverview();
  }

  /**
   * Reads and shows the overview, then plans the next refresh unless paused, hidden or signed
   * out. The counts are read every REFRESH_MS, the chart every CHART_MS (or when the window
   * changes). A failed read marks the ticker unknown: the page cannot tell it is ticking.
   */
  async function refreshOverview() {
    clearTimeout(live.timer);
    if (!session.token) return;
    const seq = ++live.seq;
    try {
      const hours = Number($('ov-window').value) || 24;
      const stale = !live.runs || live.runs.hours !== hours || Date.now() - live.runs.at >= CHART_MS;
      const [o, runs] = await Promise.all([
        api('GET', '/v1/admin/overview'),
        stale ? api('GET', '/v1/admin/runs', { query: { hours } }) : Promise.resolve(live.runs.answer),
      ]);
      if (seq !== live.seq) return;
      if (stale) live.runs = { hours, at: Date.now(), answer: runs };
      live.okAt = new Date().toISOString(); // the browser's clock, which the age is read on
      showOverview(o, runs, hours);
      $('ov-updated').textContent = live.paused
        ? 'Updates paused.'
        : `Updated ${utc(o.now)}; refreshes every ${REFRESH_MS / 1000} s (the chart every ${CHART_MS / 60000} min).`;
    } catch (err) {
      if (seq === live.seq) tickerUnknown();
      throw err;
    } finally {
      if (seq === live.seq && !live.paused && session.token && !document.hidden) {
        live.timer = setTimeout(() => refreshOverview().catch(report), REFRESH_MS);
      }
    }
  }

  function tickerUnknown() {
    $('ticker-status').textContent = 'Unknown';
    $('ticker-status').className = 'big bad';
    $('ticker-detail').textContent = live.okAt
      ? `No answer from the server; last update ${relative(live.okAt, new Date().toISOString())}.`
      : 'No answer from the server.';
  }

  /** Whether keyboard focus is inside the element with this id (rebuilding it would lose it). */
  const focusIn = (id) => $(id).contains(document.activeElement);

  /** Replaces an area only when its data changed and focus is not inside it. */
  function update(id, data, build) {
    const key = JSON.stringify(data);
    if (live.shown[id] === key || focusIn(id)) return;
    live.shown[id] = key;
    build();
  }

  function showOverview(o, runs, hours) {
    const counts = o.counts;
    for (const key of ['active', 'paused', 'completed']) {
      $(`c-schedules-${key}`).textContent = counts[`schedules_${key}`];
    }
    for (const key of ['scheduled', 'pending', 'running', 'buffered']) $(`c-jobs-${key}`).textContent = counts[`jobs_${key}`];
    const windowName = hours === 168 ? 'Last 7 days' : 'Last 24 hours';
    $('win-title').textContent = windowName;
    $('c-win-fires').textContent = runs.fires;
    $('c-win-failures').textContent = runs.failures;
    $('c-win-skips').textContent = runs.skips;
    $('c-win-p50').textContent = duration(runs.late_p50_ms);
    $('c-win-p99').textContent = duration(runs.late_p99_ms);
    $('c-dlq').textContent = counts.dlq_entries;
    const ticking = o.ticker.status === 'ok';
    $('ticker-status').textContent = ticking ? 'Ticking' : 'Stalled';
    $('ticker-status').className = `big ${ticking ? 'good' : 'bad'}`;
    $('ticker-detail').textContent = o.ticker.last_tick_at
      ? `Last tick ${relative(o.ticker.last_tick_at, o.now)}; every ${o.ticker.tick_interval_seconds} s at most.`
      : `No tick yet; every ${o.ticker.tick_interval_seconds} s at most.`;
    update('ov-chart', runs, () => {
      const open = $('ov-chart').querySelector('details[open]') !== null;
      $('ov-chart').replaceChildren(runsChart(runs, { id: 'ov-runs', title: `Runs per hour, ${windowName.toLowerCase()}` }));
      const details = $('ov-chart').querySelector('details');
      if (open && details) details.open = true;
    });

    // The minute is part of the key: the "In" column counts down.
    update('next-table', [o.next_fires, o.now.slice(0, 16)], () => fill('next-table', o.next_fires.map((next) => h('tr', {},
      cell('Schedule', scheduleLink(next.schedule_id, label(next.domain, next.schedule_type)),
        h('div', { class: 'muted mono' }, next.cron ? `${next.cron} · ${next.timezone}` : 'once')),
      cell('Fires at', fireEl(next.fire)),
      cell('In', relative(next.fire.at, o.now))))));

    update('failures-table', o.recent_failures, () => fill('failures-table', o.recent_failures.map((job) => h('tr', {},
      cell('Schedule', label(job.domain, job.schedule_type), h('div', {}, jobLink(job.id))),
      cell('Scheduled for', timeEl(job.scheduled_for)),
      cell('Attempts', job.attempt),
      cell('Error', errorText(job.error)),
      cell('Actions', h('div', { class: 'actions' },
        h('a', { href: `${UI}/jobs?schedule_id=${encodeURIComponent(job.schedule_id)}` }, 'Jobs'),
        canWrite() ? actionButton('Retry', `Retry job ${short(job.id)} of ${job.schedule_type || 'its schedule'}`, async () => {
          await api('POST', `/v1/jobs/${encodeURIComponent(job.id)}/retry`);
          say(`Job ${short(job.id)} will be retried now.`, 'ok');
          await refreshOverview();
        }) : null))))));
  }

  // ---------------------------------------------------------------------------------------
  // One schedule
  // ---------------------------------------------------------------------------------------

  const GAP = {
    shift: 'a time skipped when clocks go forward runs right after the gap',
    skip: 'a time skipped when clocks go forward does not run',
  };
  const REPEAT = {
    once: 'a time that occurs twice when clocks go back runs once',
    twice: 'a time that occurs twice when clocks go back runs twice',
  };

  const OVERLAP = {
    skip: 'an occurrence due while a job of the schedule is open is skipped, on the record',
    buffer_one: 'an occurrence due while a job is open waits for it (one at most)',
    allow_all: 'an occurrence due while a job is open runs beside it',
    buffer_all: 'occurrences due while a job is open wait for it and run one after another, in order',
    cancel_other: 'an occurrence due while a job is open cancels that job (its call aborted) and runs instead',
  };

  /**
   * The policy facts: what an overlap, a missed occurrence and a dead letter do, the jitter,
   * the bounds and the runs left. A one-shot has only the catch-up window and the jitter.
   */
  function policyFacts(s) {
    const cron = s.kind === 'cron';
    const none = (text) => h('span', { class: 'muted' }, text);
    const jitter = s.max_jitter === '0s'
      ? none('none: each call at its occurrence')
      : `each call up to ${s.max_jitter} after its occurrence (a fixed offset per occurrence)`;
    return [
      ...(cron ? fact('Overlap', h('span', { id: 's-overlap' }, h('code', {}, s.overlap), `: ${OVERLAP[s.overlap] || s.overlap}.`)) : []),
      ...fact('Catch-up window', h('span', { id: 's-catchup' }, h('code', {}, s.catchup_window),
        ': a missed occurrence runs late only within it; an older one is recorded as skipped.')),
      ...fact('Jitter', h('span', { id: 's-jitter' }, jitter)),
      ...(cron ? fact('Starts', h('span', { id: 's-start' }, s.start_at ? timeEl(s.start_at) : none('no start bound'))) : []),
      ...(cron ? fact('Ends', h('span', { id: 's-end' }, s.end_at ? timeEl(s.end_at) : none('no end bound'),
        s.end_at ? ' (then completed)' : null)) : []),
      ...(cron ? fact('Pause on failure', h('span', { id: 's-pause-on-failure' }, s.pause_on_failure
        ? 'yes: a job that lands in the dead-letter queue pauses the schedule' : 'no')) : []),
      ...(cron ? fact('Remaining runs', h('span', { id: 's-remaining' }, s.remaining_runs === null || s.remaining_runs === undefined
        ? none('no limit') : `${s.remaining_runs} (then completed)`)) : []),
      ...fact('After completion', h('span', { id: 's-after-completion' }, s.after_completion === 'delete'
        ? 'deleted once completed and its last job has ended' : 'kept')),
    ];
  }

  async function schedulePage(first) {
    const id = idParam();
    if (!id) {
      $('s-title').textContent = 'No schedule chosen';
      say('Open a schedule from the schedules list.', 'error');
      return;
    }
    let s;
    try {
      // A deleted schedule is still shown (its jobs and dead letters link to it), without actions.
      s = await api('GET', `/v1/schedules/${id}`, { query: { include_deleted: true } });
    } catch (err) {
      if (err.status !== 404) throw err;
      $('s-title').textContent = 'Schedule not found';
      say('This environment has no such schedule.', 'error');
      return;
    }
    showSchedule(s, first);
    await Promise.all([scheduleFires(s), scheduleCharts(s), scheduleJobs(s), scheduleAudit(s)]
      .map((p) => p.catch(report)));
  }

  function showSchedule(s, first) {
    const name = `${s.domain}/${s.schedule_type}`;
    $('s-title').replaceChildren(label(s.domain, s.schedule_type), ' ', badge(s.status));
    const timing = s.kind === 'cron'
      ? [h('p', { class: 'words', id: 's-words' }, s.description || s.cron),
        h('code', {}, s.cron), h('span', { class: 'muted' }, ` · ${s.timezone}`)]
      : [h('p', { class: 'words', id: 's-words' }, s.description || 'Once'), timeEl(s.run_at)];
    const baseUrl = s.target_config && typeof s.target_config.baseUrl === 'string' ? s.target_config.baseUrl : null;
    $('s-facts').replaceChildren(
      ...fact('Timing', ...timing),
      // The description says what daylight saving does; without one, the policies in words.
      ...(s.kind === 'cron' && !s.description ? fact('Daylight saving', `${GAP[s.on_dst_gap] || s.on_dst_gap}; ${REPEAT[s.on_dst_repeat] || s.on_dst_repeat}.`) : []),
      ...fact('Callback', baseUrl ? h('code', { id: 's-callback' }, `POST ${baseUrl.replace(/\/+$/, '')}/v1/internal/schedules/run`) : h('span', { class: 'error-text' }, 'no baseUrl')),
      ...fact('Payload', h('pre', { class: 'json', id: 's-payload' }, JSON.stringify(s.payload, null, 2))),
      ...fact('Retries', `${s.max_retries} before the dead-letter queue` + (s.retry_count ? `; ${s.retry_count} in a row so far` : '')),
      ...policyFacts(s),
      ...(Object.keys(s.labels || {}).length ? fact('Labels', h('span', { id: 's-labels' },
        ...Object.entries(s.labels).map(([key, value]) => h('code', { class: 'label-chip' }, `${key}=${value}`)))) : []),
      ...((s.exclude || []).length ? fact('Except', h('span', { id: 's-exclude' },
        ...s.exclude.map((entry) => h('code', { class: 'label-chip' }, entry)))) : []),
      // next_run_at is the stored call instant, its jitter included.
      ...fact('Next run', h('span', { id: 's-next-run' }, timeEl(s.next_run_at),
        s.next_run_at && s.max_jitter && s.max_jitter !== '0s' ? h('span', { class: 'muted' }, ' (the call, jitter included)') : null)),
      ...fact('Last run', timeEl(s.last_run_at)),
      ...fact('Created', `${s.created_by}, `, timeEl(s.created_at)),
      ...fact('Updated', `${s.updated_by}, `, timeEl(s.updated_at)),
      ...fact('Id', h('code', {}, s.id)));
    const actions = $('s-actions');
    actions.replaceChildren();
    if (canWrite() && s.status !== 'deleted') {
      const reload = () => schedulePage(false);
      const post = (action, done) => async () => {
        await api('POST', `/v1/schedules/${encodeURIComponent(s.id)}/${action}`);
        say(done, 'ok');
        await reload();
      };
      actions.append(actionButton('Edit', `Edit ${name}`, async () => openEdit(s), 'primary'));
      if (s.status === 'active') actions.append(actionButton('Pause', `Pause ${name}`, post('pause', `Paused ${name}.`)));
      if (s.status === 'paused') actions.append(actionButton('Resume', `Resume ${name}`, post('resume', `Resumed ${name}.`)));
      actions.append(actionButton('Trigger', `Trigger ${name} now`, async () => {
        const job = await api('POST', `/v1/schedules/${encodeURIComponent(s.id)}/trigger`);
        say(`Triggered ${name}: job ${short(job.id)} is ${job.status}.`, 'ok');
        await reload();
      }));
      if (s.kind === 'cron') {
        actions.append(actionButton('Backfill', `Backfill past occurrences of ${name}`, async () => openBackfill(s)));
      }
      actions.append(confirmButton('Delete', `Delete ${name}`, async () => {
        await api('DELETE', `/v1/schedules/${encodeURIComponent(s.id)}`);
        storage.set(FLASH_KEY, `Deleted ${name}.`);
        window.location.assign(`${UI}/schedules`);
      }));
    }
    actions.append(h('a', { href: `${UI}/jobs?schedule_id=${encodeURIComponent(s.id)}` }, 'All its jobs'));
    if (first) {
      $('s-edit').addEventListener('submit', (event) => {
        event.preventDefault();
        saveEdit().catch(report);
      });
      $('e-cancel').addEventListener('click', () => { $('s-edit').hidden = true; });
      $('s-backfill').addEventListener('submit', (event) => {
        event.preventDefault();
        runBackfill().catch(report);
      });
      $('b-cancel').addEventListener('click', () => { $('s-backfill').hidden = true; });
    }
  }

  // The schedule a backfill is asked for.
  let backfilling = null;

  function openBackfill(s) {
    backfilling = s;
    for (const f of ['from', 'to', 'overlap']) {
      $(`b-${f}-error`).hidden = true;
      $(`b-${f}`).removeAttribute('aria-invalid');
    }
    $('s-backfill').hidden = false;
    $('b-from').focus();
  }

  async function runBackfill() {
    const s = backfilling;
    if (!s) return;
    const body = { from: $('b-from').value.trim(), to: $('b-to').value.trim() };
    if ($('b-overlap').value) body.overlap = $('b-overlap').value;
    try {
      const done = await api('POST', `/v1/schedules/${encodeURIComponent(s.id)}/backfill`, { body });
      $('s-backfill').hidden = true;
      say(`Backfilled ${s.domain}/${s.schedule_type} under ${done.overlap}: ${done.occurrences} occurrence(s); ${done.started} started, ${done.skipped} skipped, the rest wait their turn.`, 'ok');
      await schedulePage(false);
    } catch (err) {
      // A refused field is shown beside its input; anything else is reported.
      const errors = (err.problem && err.problem.errors) || [];
      let shown = false;
      for (const e of errors) {
        const f = ['from', 'to', 'overlap'].includes(e.field) ? e.field : null;
        if (!f) continue;
        $(`b-${f}-error`).textContent = e.message;
        $(`b-${f}-error`).hidden = false;
        $(`b-${f}`).setAttribute('aria-invalid', 'true');
        shown = true;
      }
      if (!shown) throw err;
    }
  }

  // The schedule being edited.
  let editing = null;
  const EDIT_FIELDS = ['cron', 'timezone', 'base_url', 'payload', 'max_retries'];

  function openEdit(s) {
    editing = s;
    const cron = s.kind === 'cron';
    $('e-cron').closest('.field').hidden = !cron;
    $('e-timezone').closest('.field').hidden = !cron;
    $('e-cron').value = s.cron || '';
    $('e-timezone').value = s.timezone;
    $('e-base_url').value = (s.target_config && s.target_config.baseUrl) || '';
    $('e-payload').value = JSON.stringify(s.payload, null, 2);
    $('e-max_retries').value = s.max_retries;
    clearEditErrors();
    $('s-edit').hidden = false;
    $(cron ? 'e-cron' : 'e-base_url').focus();
  }

  function clearEditErrors() {
    for (const f of EDIT_FIELDS) {
      $(`e-${f}-error`).hidden = true;
      $(`e-${f}-error`).textContent = '';
      $(`e-${f}`).removeAttribute('aria-invalid');
    }
  }

  function editError(field, message) {
    const id = field.startsWith('target_config') ? 'base_url' : field.split('.')[0];
    if (!EDIT_FIELDS.includes(id)) return false;
    const error = $(`e-${id}-error`);
    error.textContent = error.textContent ? `${error.textContent}; ${message}` : message;
    error.hidden = false;
    $(`e-${id}`).setAttribute('aria-invalid', 'true');
    return true;
  }

  async function saveEdit() {
    const s = editing;
    if (!s) return;
    clearEditErrors();
    const body = {};
    let payload;
    try {
      payload = JSON.parse($('e-payload').value.trim() || '{}');
    } catch (err) {
      editError('payload', `is not valid JSON (${err.message})`);
      $('e-payload').focus();
      return;
    }
    if (JSON.stringify(payload) !== JSON.stringify(s.payload)) body.payload = payload;
    if (s.kind === 'cron') {
      if ($('e-cron').value.trim() !== s.cron) body.cron = $('e-cron').value.trim();
      if ($('e-timezone').value.trim() !== s.timezone) body.timezone = $('e-timezone').value.trim();
    }
    const baseUrl = $('e-base_url').value.trim();
    // The other keys of target_config are kept: a PATCH replaces the whole object.
    if (baseUrl !== ((s.target_config && s.target_config.baseUrl) || '')) body.target_config = { ...s.target_config, baseUrl };
    const retries = Number($('e-max_retries').value);
    if (!Number.isInteger(retries) || retries < 0) {
      editError('max_retries', 'must be a whole number from 0 to 100');
      return;
    }
    if (retries !== s.max_retries) body.max_retries = retries;
    if (!Object.keys(body).length) {
      $('s-edit').hidden = true;
      say('Nothing changed.', 'info');
      return;
    }
    try {
      await api('PATCH', `/v1/schedules/${encodeURIComponent(s.id)}`, { body });
    } catch (err) {
      const errors = err.problem && Array.isArray(err.problem.errors) ? err.problem.errors : [];
      if (err.status === 400 && errors.length) {
        const rest = errors.filter((e) => !editError(String(e.field || ''), e.message));
        say(`Not saved: ${rest.map((e) => `${e.field}: ${e.message}`).join('; ') || 'see the fields marked below.'}`, 'error');
        return;
      }
      throw err;
    }
    $('s-edit').hidden = true;
    say(`Saved ${s.domain}/${s.schedule_type}.`, 'ok');
    await schedulePage(false);
  }

  async function scheduleFires(s) {
    const area = $('s-next');
    if (!['active', 'paused'].includes(s.status)) {
      area.replaceChildren(h('p', { class: 'muted' }, `None: the schedule is ${s.status}.`));
      return;
    }
    if (s.kind !== 'cron') {
      area.replaceChildren(h('p', {}, 'Runs once, at ', timeEl(s.run_at)));
      return;
    }
    if (s.remaining_runs === 0) {
      area.replaceChildren(h('p', { class: 'muted' }, 'None: no runs are left.'));
      return;
    }
    // The schedule's own calls: its jitter (seeded by its id), its bounds and its runs left; an
    // active one's from its stored next call, a paused one's as if resumed now.
    const query = {
      cron: s.cron, timezone: s.timezone, on_dst_gap: s.on_dst_gap, on_dst_repeat: s.on_dst_repeat, count: 8,
      max_jitter: s.max_jitter, schedule_id: s.id, start_at: s.start_at || '', end_at: s.end_at || '',
      remaining_runs: s.remaining_runs === null || s.remaining_runs === undefined ? '' : String(s.remaining_runs),
      exclude: (s.exclude || []).join(';'),
    };
    if (s.status === 'active' && s.next_run_at) {
      query.after = new Date(Date.parse(s.next_run_at) - 1).toISOString();
    }
    let preview;
    try {
      preview = await api('GET', '/v1/admin/preview', { query });
    } catch (err) {
      // An end already past (the schedule completes at its next round): nothing to list.
      if (err.status !== 400) throw err;
      area.replaceChildren(h('p', { class: 'muted' }, `None to list: ${err.message}`));
      return;
    }
    area.replaceChildren(
      h('p', {}, `${s.status === 'paused' ? 'If resumed now, on' : 'On'} the ${preview.timezone} clock` +
        (preview.max_jitter !== '0s' ? `, each call with its jitter (up to ${preview.max_jitter}):` : ':')),
      h('ol', { class: 'fires', id: 's-fires' }, preview.fires.map((fire) => h('li', {}, fireEl(fire),
        h('span', { class: 'muted' }, ` ${relative(fire.at, preview.now)}`)))));
  }

  async function scheduleCharts(s) {
    const [day, week] = await Promise.all([24, 168].map((hours) =>
      api('GET', '/v1/admin/runs', { query: { schedule_id: s.id, hours } })));
    $('s-chart-day').replaceChildren(runsChart(day, { id: 's-runs-day', title: 'Last 24 hours' }));
    $('s-chart-week').replaceChildren(runsChart(week, { id: 's-runs-week', title: 'Last 7 days' }));
  }

  async function scheduleJobs(s) {
    const jobs = await api('GET', '/v1/jobs', { query: { schedule_id: s.id, limit: 10 } });
    fill('s-jobs-table', jobs.items.map((job) => h('tr', { 'data-job': job.id },
      cell('Job', jobLink(job.id)),
      cell('Status', jobBadge(job)),
      cell('Scheduled for', timeEl(job.scheduled_for)),
      cell('Attempts', job.attempt),
      cell('Finished', timeEl(job.finished_at)),
      cell('Error', errorText(job.error)))));
  }

  /**
   * An entry written before pause and resume had their own actions is a `schedule.update`
   * whose snapshots differ in status: it says which change it was.
   */
  function statusChange(entry) {
    const before = entry.before && entry.before.status;
    const after = entry.after && entry.after.status;
    if (entry.action !== 'schedule.update' || !before || !after || before === after) return null;
    return h('span', { class: 'muted' }, ` (status ${before} → ${after})`);
  }

  /** Why the engine made a change (a pause on failure), kept beside the after snapshot. */
  const reasonOf = (entry) => (entry.after && typeof entry.after.reason === 'string' ? entry.after.reason : null);

  /**
   * A paused schedule whose latest pause or resume is a pause with a reason (the engine's pause
   * on failure) says why beside its status. The trail is newest first.
   */
  function showPauseReason(s, items) {
    if (s.status !== 'paused') return;
    const latest = items.find((entry) => entry.action === 'schedule.pause' || entry.action === 'schedule.resume');
    const reason = latest && latest.action === 'schedule.pause' ? reasonOf(latest) : null;
    if (!reason) return;
    $('s-facts').prepend(...fact('Paused', h('span', { id: 's-paused-reason' }, reason, ' · ', timeEl(latest.at))));
  }

  async function scheduleAudit(s) {
    const area = $('s-audit');
    let audit;
    try {
      audit = await api('GET', '/v1/audit', { query: { schedule_id: s.id, limit: 20 } });
    } catch (err) {
      if (err.status !== 404) throw err;
      area.replaceChildren(h('p', { class: 'muted' }, 'This server does not offer the audit trail.'));
      return;
    }
    const items = audit && Array.isArray(audit.items) ? audit.items : [];
    showPauseReason(s, items);
    area.replaceChildren(items.length
      ? h('ol', { class: 'audit', id: 's-audit-list' }, items.map((entry) => h('li', {},
        timeEl(entry.at), ' ', h('strong', {}, entry.action), statusChange(entry), ` by ${entry.actor}`,
        reasonOf(entry) ? h('span', { class: 'muted' }, ` (${reasonOf(entry)})`) : null,
        entry.detail && Object.keys(entry.detail).length
          ? h('code', { class: 'detail' }, ` ${JSON.stringify(entry.detail)}`) : null)))
      : h('p', { class: 'muted' }, 'No entries.'));
  }

  // ---------------------------------------------------------------------------------------
  // One job
  // ---------------------------------------------------------------------------------------

  const ms = (from, to) => (from && to ? Date.parse(to) - Date.parse(from) : null);

  async function jobPage() {
    const id = idParam();
    if (!id) {
      $('j-title').textContent = 'No job chosen';
      say('Open a job from the jobs list.', 'error');
      return;
    }
    let job;
    try {
      job = await api('GET', `/v1/jobs/${id}`);
    } catch (err) {
      if (err.status !== 404) throw err;
      $('j-title').textContent = 'Job not found';
      say('This environment has no such job.', 'error');
      return;
    }
    let s = null;
    try {
      s = await api('GET', `/v1/schedules/${job.schedule_id}`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    const letter = await deadLetter(job);
    const name = s ? `${s.domain}/${s.schedule_type}` : `schedule ${short(job.schedule_id)}`;
    $('j-title').replaceChildren(`Job ${short(job.id)} of `, s ? label(s.domain, s.schedule_type) : name, ' ', jobBadge(job));
    $('j-facts').replaceChildren(
      ...fact('Schedule', scheduleLink(job.schedule_id, name)),
      ...fact('Scheduled for', timeEl(job.scheduled_for)),
      ...fact('Attempts', String(job.attempt)),
      ...fact('Started', timeEl(job.started_at)),
      ...fact('Finished', timeEl(job.finished_at)),
      ...fact('Duration', duration(ms(job.started_at, job.finished_at))),
      ...(job.held_by_pause ? fact('Held', h('span', { id: 'j-held' }, 'Its schedule is paused: this job runs once the schedule is resumed.')) : []),
      ...fact('Next retry', job.status === 'pending' && job.next_attempt_at
        ? h('span', { id: 'j-next-retry' }, timeEl(job.next_attempt_at)) : h('span', { class: 'muted' }, 'none')),
      ...fact('Error', errorText(job.error)),
      ...(letter ? fact('Dead-lettered', h('span', { id: 'j-dead-letter' }, timeEl(letter.landed_at), ' · ',
        h('a', { href: `${UI}/dlq?job_id=${encodeURIComponent(job.id)}` }, `dead-letter entry ${short(letter.id)}`))) : []),
      ...(job.superseded_by ? fact('Superseded by', jobLink(job.superseded_by)) : []),
      ...fact('Result', job.result === null || job.result === undefined
        ? h('span', { class: 'muted' }, '—') : h('pre', { class: 'json' }, JSON.stringify(job.result, null, 2))),
      ...fact('Idempotency key', h('code', {}, job.idempotency_key)));
    showAttempts(job);
    const actions = $('j-actions');
    actions.replaceChildren();
    if (canWrite() && job.status === 'failed') {
      actions.append(actionButton('Retry', `Retry job ${short(job.id)} of ${name}`, async () => {
        await api('POST', `/v1/jobs/${encodeURIComponent(job.id)}/retry`);
        say(`Job ${short(job.id)} of ${name} will be retried now.`, 'ok');
        await jobPage();
      }, 'primary'));
    }
    const others = await api('GET', '/v1/jobs', { query: { schedule_id: job.schedule_id, limit: 6 } });
    const related = [];
    if (job.superseded_by) related.push(h('li', {}, 'Superseded by ', jobLink(job.superseded_by)));
    for (const other of others.items.filter((o) => o.id !== job.id)) {
      const newer = other.id > job.id ? 'later' : 'earlier';
      related.push(h('li', {}, jobLink(other.id), ' ', jobBadge(other),
        h('span', { class: 'muted' }, ` ${newer}, scheduled for ${utc(other.scheduled_for)}`)));
    }
    $('j-related').replaceChildren(...(related.length ? related : [h('li', { class: 'muted' }, 'None.')]));
  }

  /** The job's dead-letter entry, if it sits in the queue (a server without the filter: none). */
  async function deadLetter(job) {
    if (job.status !== 'failed') return null;
    try {
      const found = await api('GET', '/v1/dlq', { query: { job_id: job.id, limit: 1 } });
      return found.items.find((entry) => entry.job_id === job.id) || null;
    } catch (err) {
      if (err.status !== 400) throw err;
      return null;
    }
  }

  /** Every attempt of the job, from the attempt ledger. */
  function showAttempts(job) {
    const attempts = Array.isArray(job.attempts) ? job.attempts : [];
    $('j-attempts-note').hidden = attempts.length > 0;
    fill('j-attempts-table', attempts.map((a) => h('tr', {},
      cell('Attempt', a.attempt),
      cell('Started', timeEl(a.started_at)),
      cell('Duration', duration(a.duration_ms === null || a.duration_ms === undefined
        ? ms(a.started_at, a.finished_at) : a.duration_ms)),
      cell('Status code', a.http_status === null || a.http_status === undefined
        ? (a.outcome === 'succeeded' ? '2xx' : '—') : String(a.http_status)),
      cell('Error class', errorText(a.error_class)),
      cell('Response', a.response_excerpt ? h('code', { class: 'excerpt' }, a.response_excerpt) : h('span', { class: 'muted' }, '—')))));
  }

  return {
    stopOverview,
    overview: overviewPage,
    'schedules/view': schedulePage,
    'jobs/view': jobPage,
  };
})();
