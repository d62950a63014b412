// sentin8-cron admin pages: run charts drawn as inline SVG by this script (no library, no
// CDN; the page's Content-Security-Policy allows nothing else). Colours come from the style
// sheet through classes, never from style attributes. Each hour is a focusable group with a
// text title (one tab stop per chart, arrow keys between hours), its numbers are read out as
// it gets focus, and a table under the chart holds every non-empty hour, so the chart reads
// with a keyboard and a screen reader too.
'use strict';

const sentin8AdminChart = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const { h } = sentin8AdminKit;

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== undefined && value !== null) el.setAttribute(key, String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined) el.append(child);
    }
    return el;
  }

  /** "340 ms", "2.5 s", "4 min". */
  function duration(ms) {
    if (ms === null || ms === undefined) return '—';
    const abs = Math.abs(ms);
    if (abs < 1000) return `${Math.round(ms)} ms`;
    if (abs < 60000) return `${(ms / 1000).toFixed(abs < 10000 ? 1 : 0)} s`;
    if (abs < 3600000) return `${Math.round(ms / 60000)} min`;
    return `${(ms / 3600000).toFixed(1)} h`;
  }

  function plural(n, one, many) {
    return `${n} ${n === 1 ? one : many}`;
  }

  /** An hour's label: "Tue 09:00" (UTC) for a week, "09:00" for a day. */
  function hourLabel(iso, week) {
    const d = new Date(iso);
    const hh = String(d.getUTCHours()).padStart(2, '0');
    if (!week) return `${hh}:00`;
    const day = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][d.getUTCDay()];
    return `${day} ${hh}:00`;
  }

  function hourText(hour, week) {
    const parts = [
      plural(hour.fires, 'fire', 'fires'),
      plural(hour.failures, 'failure', 'failures'),
      plural(hour.skips, 'skip', 'skips'),
    ];
    if (hour.late_p50_ms !== null) {
      parts.push(`late ${duration(hour.late_p50_ms)} median, ${duration(hour.late_p99_ms)} p99`);
    }
    return `${hourLabel(hour.hour, week)} UTC: ${parts.join(', ')}`;
  }

  /**
   * A runs chart for `runs` (the answer of /v1/admin/runs): stacked bars of fires per hour
   * (succeeded, failed, skipped; pending and running jobs are counted, not drawn) over a band
   * of lateness (p99 light, median dark).
   */
  function runsChart(runs, options) {
    const { id, title } = options;
    const hours = runs.hours;
    const week = hours.length > 48;
    const width = 720;
    const barsTop = 8;
    const barsHeight = 120;
    const lateTop = barsTop + barsHeight + 18;
    const lateHeight = 44;
    const axis = lateTop + lateHeight + 16;
    const height = axis + 4;
    const step = width / Math.max(hours.length, 1);
    const gap = step > 6 ? 1.5 : 0.5;
    const maxFires = Math.max(1, ...hours.map((x) => x.fires));
    const maxLate = Math.max(1, ...hours.map((x) => x.late_p99_ms || 0));
    const summary = `${title}: ${plural(runs.fires, 'fire', 'fires')}, ` +
      `${plural(runs.failures, 'failure', 'failures')}, ${plural(runs.skips, 'skip', 'skips')}` +
      (runs.late_p50_ms !== null
        ? `; lateness ${duration(runs.late_p50_ms)} median, ${duration(runs.late_p99_ms)} p99.`
        : '.');
    const readout = h('p', { class: 'readout', id: `${id}-readout`, 'aria-live': 'polite' }, summary);
    const chart = svg('svg', {
      viewBox: `0 0 ${width} ${height}`,
      class: 'runs-chart',
      role: 'group',
      'aria-label': summary,
      id,
      focusable: 'false',
    });
    chart.append(
      svg('line', { x1: 0, x2: width, y1: barsTop + barsHeight, y2: barsTop + barsHeight, class: 'axis' }),
      svg('line', { x1: 0, x2: width, y1: lateTop + lateHeight, y2: lateTop + lateHeight, class: 'axis' }),
      svg('text', { x: 2, y: barsTop + 10, class: 'scale' }, `${maxFires} per hour`),
      svg('text', { x: 2, y: lateTop + 10, class: 'scale' }, `late ≤ ${duration(maxLate)}`));
    hours.forEach((hour, i) => {
      const x = i * step + gap / 2;
      const w = Math.max(step - gap, 0.5);
      const scale = (n) => (n / maxFires) * barsHeight;
      // Only succeeded jobs are drawn as "ran": pending and running ones are not yet.
      const ok = hour.succeeded;
      // One tab stop per chart (the latest hour); arrow keys move between hours.
      const group = svg('g', { class: 'hour', tabindex: i === hours.length - 1 ? 0 : -1, 'data-hour': hour.hour, role: 'img', 'aria-label': hourText(hour, week) },
        svg('title', {}, hourText(hour, week)));
      // An invisible full-height target, so a thin hour is still easy to hover.
      group.append(svg('rect', { x, y: barsTop, width: w, height: barsHeight, class: 'hit' }));
      let y = barsTop + barsHeight;
      for (const [n, cls] of [[ok, 'ok'], [hour.failures, 'failed'], [hour.skips, 'skipped']]) {
        if (n <= 0) continue;
        const bar = scale(n);
        y -= bar;
        group.append(svg('rect', { x, y, width: w, height: bar, class: `bar ${cls}` }));
      }
      if (hour.late_p99_ms !== null) {
        const p99 = (Math.max(hour.late_p99_ms, 0) / maxLate) * lateHeight;
        const p50 = (Math.max(hour.late_p50_ms, 0) / maxLate) * lateHeight;
        group.append(
          svg('rect', { x, y: lateTop + lateHeight - p99, width: w, height: Math.max(p99, 0.5), class: 'late p99' }),
          svg('rect', { x, y: lateTop + lateHeight - p50, width: w, height: Math.max(p50, 0.5), class: 'late p50' }));
      }
      const show = () => { readout.textContent = hourText(hour, week); };
      group.addEventListener('focus', show);
      group.addEventListener('mouseenter', show);
      chart.append(group);
    });
    // A label at the start of each day (a week) or every fourth hour (a day), none at the
    // right edge: a label pushed in from the edge would sit on its neighbour.
    const ticks = week ? 7 : 6;
    for (let t = 0; t < ticks; t += 1) {
      const i = Math.round((t * hours.length) / ticks);
      if (i >= hours.length) break;
      const x = i * step + 2;
      // Every other tick is hidden on a phone, where the labels are drawn larger.
      chart.append(svg('text', { x, y: axis + 2, class: t % 2 ? 'tick odd' : 'tick' }, hourLabel(hours[i].hour, week)));
    }
    chart.addEventListener('keydown', (event) => {
      const groups = [...chart.querySelectorAll('.hour')];
      const at = groups.indexOf(document.activeElement);
      if (at < 0) return;
      const to = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: groups.length - 1 }[event.key];
      if (to === undefined || to < 0 || to >= groups.length) return;
      event.preventDefault();
      groups[at].setAttribute('tabindex', '-1');
      groups[to].setAttribute('tabindex', '0');
      groups[to].focus();
    });
    chart.addEventListener('mouseleave', () => { readout.textContent = summary; });
    chart.addEventListener('focusout', (event) => {
      if (!chart.contains(event.relatedTarget)) readout.textContent = summary;
    });

    const busy = hours.filter((x) => x.fires > 0);
    const table = h('table', { class: 'grid compact' },
      h('caption', { class: 'sr-only' }, `${title}, hours with runs`),
      h('thead', {}, h('tr', {}, ['Hour (UTC)', 'Fires', 'Failures', 'Skips', 'Late, median', 'Late, p99']
        .map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, busy.map((x) => h('tr', {},
        h('td', {}, hourLabel(x.hour, true)), h('td', {}, x.fires), h('td', {}, x.failures),
        h('td', {}, x.skips), h('td', {}, duration(x.late_p50_ms)), h('td', {}, duration(x.late_p99_ms))))));
    const legend = h('p', { class: 'legend' },
      h('span', { class: 'key ok' }, 'succeeded'), h('span', { class: 'key failed' }, 'failed'),
      h('span', { class: 'key skipped' }, 'skipped'), h('span', { class: 'key p99' }, 'late p99'),
      h('span', { class: 'key p50' }, 'late median'));
    return h('figure', { class: 'chart', 'data-fires': runs.fires },
      h('figcaption', {}, title), legend, chart, readout,
      busy.length
        ? h('details', {}, h('summary', {}, `The numbers (${plural(busy.length, 'hour', 'hours')} with runs)`), table)
        : h('p', { class: 'muted' }, 'No runs in this window.'));
  }

  return { runsChart, duration };
})();
