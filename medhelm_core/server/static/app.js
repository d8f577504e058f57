/* medhelm-server page: plain JavaScript, no libraries, no network beyond this server (or, in a static
   export, the data/*.js files beside this page). Tables follow HELM's frontend for MedHELM:
   transposed (models as columns), numbers rounded as HELM rounds them (Math.round(x * 1000) / 1000)
   and written with 3 decimals as the terminal table writes them, "-" when missing. For a reader:
   one model order on every table (the main leaderboard's mean win rate, best first: `order` from the
   server), rows that no model has a value for left out (listed under the table), the schema's
   description of each metric and benchmark on hover, a glossary under the tables, and run pages
   titled in words. */
"use strict";

const STATIC = !!window.MEDHELM_STATIC;
const DATA = {};
window.__medhelmData = function (key, value) { DATA[key] = value; };

// ------------------------------------------------------------------ data access

function dataKey(endpoint, params) {
  const keys = Object.keys(params || {}).sort();
  return endpoint + (keys.length ? "?" + keys.map(k => k + "=" + params[k]).join("&") : "");
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = () => resolve();
    s.onerror = () => reject(new Error("cannot load " + src));
    document.head.appendChild(s);
  });
}

async function api(endpoint, params) {
  params = params || {};
  const key = dataKey(endpoint, params);
  if (key in DATA) return DATA[key];
  if (STATIC) {
    const file = (window.MEDHELM_MANIFEST || {})[key];
    if (!file) throw new Error("This export does not include " + key + ".");
    await loadScript("data/" + file);
    if (!(key in DATA)) throw new Error("data file " + file + " did not define " + key);
    return DATA[key];
  }
  const qs = new URLSearchParams(params).toString();
  const resp = await fetch("api/" + endpoint + (qs ? "?" + qs : ""), { cache: "no-store" });
  let body;
  try { body = await resp.json(); } catch (e) { throw new Error(resp.status + " " + resp.statusText); }
  if (!resp.ok) throw new Error(body && body.error ? body.error : resp.statusText);
  DATA[key] = body;
  return body;
}

// ------------------------------------------------------------------ helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/* HELM's RowValue formatNumber. */
function formatNumber(value) {
  if (Number.isNaN(Number(value))) return String(value);
  return String(Math.round(Number(value) * 1000) / 1000);
}
function fmt(value) { return value === undefined || value === null ? "-" : formatNumber(value); }
/* A leaderboard value: HELM's rounding to 3 decimals, written with all 3 (0.500, 2.750, 230.500), as
   medhelm-summarize's terminal table writes it; "-" when missing; text as it is. */
function num3(value) {
  if (value === undefined || value === null) return "-";
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return String(value);
  return (Math.round(value * 1000) / 1000).toFixed(3);
}
/* Schema text for a title attribute: markdown links as their text. */
function plainText(text) {
  return String(text || "").replace(/\[([^\]]+)\]\((https?:[^)\s]+)\)/g, "$1");
}

function enc(s) { return encodeURIComponent(s); }

/* The little markdown HELM's schema descriptions use: [text](url) links. */
function markdownText(text) {
  const out = [], re = /\[([^\]]+)\]\((https?:[^)\s]+)\)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    out.push(text.slice(last, m.index), h("a", { href: m[2], rel: "noreferrer noopener", target: "_blank" }, m[1]));
    last = m.index + m[0].length;
  }
  out.push(text.slice(last));
  return out;
}
/* A run in words: its benchmark's display name, its model's display name, and the arguments of its
   run name other than the model (HELM's "scenario:key=value,key=value"). */
function runArgs(runName) {
  const colon = String(runName).indexOf(":");
  if (colon < 0) return [];
  return String(runName).slice(colon + 1).split(/,(?=[A-Za-z_][\w.-]*=)/).map(kv => {
    const eq = kv.indexOf("=");
    return eq < 0 ? [kv, ""] : [kv.slice(0, eq), kv.slice(eq + 1)];
  }).filter(([k]) => k && k !== "model" && k !== "model_deployment");
}
function benchmarkOf(run) {
  if (run.benchmark_display_name) return run.benchmark_display_name;
  const gs = (state.groups && state.groups.groups) || [];
  for (const name of run.groups || []) {
    const g = gs.find(x => x.name === name && x.kind === "benchmark");
    if (g) return g.display_name || g.name;
  }
  return String(run.run_name).split(":")[0];
}
function runWords(run) {
  return { benchmark: benchmarkOf(run), model: run.display_name || run.model_deployment || run.model || "",
           args: runArgs(run.run_name) };
}
function runHref(run, suite) { return "#/run/" + enc(suite || "") + "/" + enc(run); }
function runsHref(names) {
  if (!names || !names.length) return null;
  if (names.length === 1) return runHref(names[0], (state.runIndex[names[0]] || {}).suite);
  return "#/runs?names=" + enc(names.join("|"));
}

const state = { meta: null, groups: null, runIndex: {}, tableState: {}, transposed: true, showPublished: false };

function setView(...children) {
  const view = document.getElementById("view");
  view.replaceChildren(...children);
  window.scrollTo(0, 0);
}
function showError(err) {
  setView(h("div", { class: "error", id: "error" }, String(err && err.message ? err.message : err)));
}

// ------------------------------------------------------------------ plots (inline SVG)

const SVGNS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, v);
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const span = hi - lo, raw = span / (n || 5);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map(m => m * mag).find(st => span / st <= (n || 5)) || 10 * mag;
  const start = Math.floor(lo / step) * step, ticks = [];
  for (let v = start; v <= hi + step * 1e-9; v += step) ticks.push(Math.round(v / step) * step);
  return ticks;
}

function barChart(items, opts) {
  opts = opts || {};
  const rowH = 24, left = 170, right = 50, width = opts.width || 640;
  const height = items.length * rowH + 40;
  const max = opts.max !== undefined ? opts.max : Math.max(1e-12, ...items.map(i => i.value || 0));
  const x = v => left + (width - left - right) * (v / max);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart bar-chart" });
  for (const t of niceTicks(0, max, 5)) {
    if (t > max + 1e-9) continue;
    svg.appendChild(s("line", { x1: x(t), x2: x(t), y1: 10, y2: height - 26, class: "grid" }));
    svg.appendChild(s("text", { x: x(t), y: height - 10, "text-anchor": "middle" }, formatNumber(t)));
  }
  items.forEach((it, i) => {
    const y = 12 + i * rowH;
    svg.appendChild(s("text", { x: left - 8, y: y + 14, "text-anchor": "end" }, it.label));
    if (it.value !== undefined && it.value !== null) {
      const range = it.low !== undefined && it.high !== undefined;
      const tip = `${it.label}: ${num3(it.value)}` + (range ? ` (95% interval ${num3(it.low)} – ${num3(it.high)})` : "") +
        (it.rank_low !== undefined ? `, rank ${it.rank_low === it.rank_high ? it.rank_low : it.rank_low + "–" + it.rank_high}` : "");
      svg.appendChild(s("rect", { x: left, y: y + 2, width: Math.max(1, x(it.value) - left), height: rowH - 8, class: "bar" },
        s("title", {}, tip)));
      if (range) {   // the bootstrap interval as an error bar
        const ym = y + 2 + (rowH - 8) / 2;
        svg.appendChild(s("line", { x1: x(it.low), x2: x(it.high), y1: ym, y2: ym, class: "errbar" }, s("title", {}, tip)));
        for (const v of [it.low, it.high]) svg.appendChild(s("line", { x1: x(v), x2: x(v), y1: ym - 5, y2: ym + 5, class: "errbar" }));
      }
      svg.appendChild(s("text", { x: x(range ? Math.max(it.value, it.high) : it.value) + 5, y: y + 14 }, num3(it.value)));
    } else {
      svg.appendChild(s("text", { x: left + 4, y: y + 14, class: "muted" }, "-"));
    }
  });
  svg.appendChild(s("line", { x1: left, x2: left, y1: 8, y2: height - 26, class: "axis" }));
  return svg;
}

function scatterPlot(points, opts) {
  opts = opts || {};
  const width = opts.width || 360, height = opts.height || 300, m = { l: 52, r: 14, t: 12, b: 40 };
  const xs = points.map(p => p.x).filter(v => v !== null && v !== undefined);
  const ys = points.map(p => p.y).filter(v => v !== null && v !== undefined);
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (opts.square) { x0 = y0 = Math.min(x0, y0); x1 = y1 = Math.max(x1, y1); }
  if (opts.zeroX) x0 = Math.min(0, x0);
  if (opts.zeroY) y0 = Math.min(0, y0);
  const padX = (x1 - x0) * 0.06 || Math.abs(x1) * 0.1 || 1, padY = (y1 - y0) * 0.06 || Math.abs(y1) * 0.1 || 1;
  x0 -= padX; x1 += padX; y0 -= padY; y1 += padY;
  const X = v => m.l + (width - m.l - m.r) * (v - x0) / (x1 - x0);
  const Y = v => height - m.b - (height - m.t - m.b) * (v - y0) / (y1 - y0);
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart scatter" });
  for (const t of niceTicks(x0, x1, 5)) {
    if (t < x0 || t > x1) continue;
    svg.appendChild(s("line", { x1: X(t), x2: X(t), y1: m.t, y2: height - m.b, class: "grid" }));
    svg.appendChild(s("text", { x: X(t), y: height - m.b + 14, "text-anchor": "middle" }, formatNumber(t)));
  }
  for (const t of niceTicks(y0, y1, 5)) {
    if (t < y0 || t > y1) continue;
    svg.appendChild(s("line", { x1: m.l, x2: width - m.r, y1: Y(t), y2: Y(t), class: "grid" }));
    svg.appendChild(s("text", { x: m.l - 5, y: Y(t) + 4, "text-anchor": "end" }, formatNumber(t)));
  }
  svg.appendChild(s("line", { x1: m.l, x2: width - m.r, y1: height - m.b, y2: height - m.b, class: "axis" }));
  svg.appendChild(s("line", { x1: m.l, x2: m.l, y1: m.t, y2: height - m.b, class: "axis" }));
  if (opts.diagonal) {
    const a = Math.max(x0, y0), b = Math.min(x1, y1);
    if (b > a) svg.appendChild(s("line", { x1: X(a), y1: Y(a), x2: X(b), y2: Y(b), class: "diag" }));
  }
  svg.appendChild(s("text", { x: (m.l + width - m.r) / 2, y: height - 6, "text-anchor": "middle" }, opts.xLabel || ""));
  svg.appendChild(s("text", { x: 12, y: (m.t + height - m.b) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(m.t + height - m.b) / 2})` }, opts.yLabel || ""));
  for (const p of points) {
    if (p.x === null || p.x === undefined || p.y === null || p.y === undefined) continue;
    svg.appendChild(s("circle", { cx: X(p.x), cy: Y(p.y), r: 4.5, class: "pt " + (p.cls || "") }, s("title", {}, p.title || "")));
    if (p.label) {
      const right = X(p.x) > (m.l + width - m.r) / 2;
      svg.appendChild(s("text", { x: X(p.x) + (right ? -7 : 7), y: Y(p.y) + 4, "text-anchor": right ? "end" : "start" }, p.label));
    }
  }
  return svg;
}

function figure(caption, content) {
  return h("figure", { class: "plot" }, h("figcaption", {}, caption), content);
}

// ------------------------------------------------------------------ leaderboard tables

function cellRuns(table, row, col) {
  const cell = row[col] || {};
  if (cell.run_spec_names && cell.run_spec_names.length) return cell.run_spec_names;
  const model = row[0] || {};
  return model.run_spec_names || [];   // scenario tables keep the runs on the model cell
}

function sortedRowIndices(table, idx, dir) {
  const header = table.header[idx] || {};
  const sign = dir * (header.lower_is_better ? 1 : -1);
  const order = table.rows.map((_, i) => i);
  order.sort((ia, ib) => {
    const av = (table.rows[ia][idx] || {}).value, bv = (table.rows[ib][idx] || {}).value;
    if (av !== undefined && bv === undefined) return -1;
    if (bv !== undefined && av === undefined) return 1;
    if (typeof av === "number" && typeof bv === "number") return (av - bv) * sign;
    if (typeof av === "string" && typeof bv === "string") return sign === 1 ? av.localeCompare(bv) : bv.localeCompare(av);
    return 0;
  });
  return order;
}

function headerLabel(hd, idx, ts, onSort) {
  const better = hd.lower_is_better === true ? "lower is better" : hd.lower_is_better === false ? "higher is better" : "";
  const tip = [plainText(hd.description), better].filter(Boolean).join("\n");
  return [
    // the description on hover (title) and on keyboard focus (data-tip, shown by style.css)
    h("span", { class: "hlabel" + (tip ? " has-tip" : ""), title: tip || null, "data-tip": tip || null,
      tabindex: tip ? "0" : null }, hd.value),
    h("button", { class: "sort" + (idx === ts.sortIdx ? " on" : ""), "data-col": idx, title: "sort by " + hd.value,
      onclick: () => onSort(idx) }, idx === ts.sortIdx ? (ts.sortDir === 1 ? "▼" : "▲") : "↕"),
  ];
}

function valueCell(table, row, rowIdx, col, ts) {
  const cell = row[col] || {};
  const classes = ["cell"];
  if (cell.style && cell.style["font-weight"] === "bold") classes.push("bold");
  if (col === ts.sortIdx) classes.push("sorted");
  const cmp = table.comparison && table.comparison[String(rowIdx)] && table.comparison[String(rowIdx)][String(col)];
  let tip = cell.description || "";
  const parts = [];
  const href = cell.value !== undefined ? runsHref(cellRuns(table, row, col)) : null;
  parts.push(href ? h("a", { href, class: "drill" }, num3(cell.value)) : num3(cell.value));
  if (cmp) {
    classes.push(cmp.equal ? "cmp-equal" : "cmp-diff");
    const d = cmp.abs_diff === null || cmp.abs_diff === undefined ? "" : ` (|Δ| ${fmt(cmp.abs_diff)})`;
    tip += `\npublished ${num3(cmp.published_value)}, rebuilt ${num3(cmp.rebuilt_value)}${d}` +
      (cmp.cause ? `\ncause: ${cmp.cause}` : "");
    if (!cmp.equal || state.showPublished) {
      parts.push(h("span", { class: "pub" }, (cmp.equal ? "= pub " : "pub ") + num3(cmp.published_value) +
        (!cmp.equal && cmp.cause ? " · " + cmp.cause : "")));
    }
  }
  const ci = table.intervals && table.intervals[String(rowIdx)] && table.intervals[String(rowIdx)][String(col)];
  if (ci) {
    classes.push("has-ci");
    tip += `\n± ${num3((ci.high - ci.low) / 2)}: 95% bootstrap interval ${num3(ci.low)} – ${num3(ci.high)} (${ci.n} instances)`;
  }
  return h("td", { class: classes.join(" "), "data-row": rowIdx, "data-col": col, title: tip.trim() || null }, parts);
}

/* Whether any model has a value in column `col` (or a published value to compare with). */
function columnHasValue(table, col) {
  return table.rows.some((row, i) => {
    const v = (row[col] || {}).value;
    if (v !== undefined && v !== null) return true;
    const cmp = table.comparison && table.comparison[String(i)] && table.comparison[String(i)][String(col)];
    return !!cmp && cmp.published_value !== undefined && cmp.published_value !== null;
  });
}

/* The page's one model order (the server's `order`: the main leaderboard's mean win rate, best first),
   or, once the reader sorts this table by a column, that column's sort as HELM's page does it. */
function rowOrder(table, ts) {
  if (ts.sortIdx === null) return table.order && table.order.length === table.rows.length ? table.order.slice() : table.rows.map((_, i) => i);
  return sortedRowIndices(table, ts.sortIdx, ts.sortDir);
}

function renderTable(table, key) {
  const ts = state.tableState[key] || (state.tableState[key] = { sortIdx: null, sortDir: 1 });
  const cols = [];      // the header columns shown (1..n), in order
  const empty = [];     // the ones no model has a value for
  for (let c = 1; c < table.header.length; c++) (columnHasValue(table, c) ? cols : empty).push(c);
  const box = h("div", { class: "table-box" });
  const wrap = h("div", { class: "table-wrap" });
  const draw = () => {
    const onSort = idx => {
      if (idx === ts.sortIdx) ts.sortDir = -ts.sortDir;
      else { ts.sortDir = idx === 0 ? -1 : 1; ts.sortIdx = idx; }
      draw();
    };
    const order = rowOrder(table, ts);
    const t = h("table", { class: "lb " + (state.transposed ? "transposed" : "normal"), "data-title": table.title });
    if (state.transposed) {
      // HELM's TransposedLeaderboardTable: header entries become rows, models become columns
      t.appendChild(h("thead", {}, h("tr", {},
        h("th", { class: "rowhead" + (ts.sortIdx === 0 ? " sorted" : "") }, headerLabel(table.header[0], 0, ts, onSort)),
        order.map(i => {
          const m = table.rows[i][0] || {};
          const href = runsHref(m.run_spec_names);
          return h("th", { class: "model", "data-row": i, title: m.description || null }, href ? h("a", { href }, m.value) : m.value);
        }))));
      const body = h("tbody");
      for (const c of cols) {
        body.appendChild(h("tr", { "data-col": c },
          h("th", { class: "rowhead" + (c === ts.sortIdx ? " sorted" : "") }, headerLabel(table.header[c], c, ts, onSort)),
          order.map(i => valueCell(table, table.rows[i], i, c, ts))));
      }
      t.appendChild(body);
    } else {
      t.appendChild(h("thead", {}, h("tr", {}, [0, ...cols].map(c =>
        h("th", { class: c === 0 ? "model" : (c === ts.sortIdx ? "sorted" : ""), "data-col": c },
          headerLabel(table.header[c], c, ts, onSort))))));
      const body = h("tbody");
      for (const i of order) {
        const m = table.rows[i][0] || {};
        const href = runsHref(m.run_spec_names);
        body.appendChild(h("tr", {},
          h("td", { class: "model", "data-row": i }, href ? h("a", { href }, m.value) : m.value),
          cols.map(c => valueCell(table, table.rows[i], i, c, ts))));
      }
      t.appendChild(body);
    }
    wrap.replaceChildren(t);
  };
  draw();
  if (cols.length) box.appendChild(wrap);
  else box.appendChild(h("p", { class: "muted no-values" }, "No model has a value in this table."));
  if (empty.length && cols.length) {
    box.appendChild(h("details", { class: "hidden-rows" },
      h("summary", {}, `${empty.length} ${empty.length === 1 ? "row" : "rows"} with no value for any model not shown`),
      h("ul", {}, empty.map(c => h("li", { title: plainText(table.header[c].description) || null }, table.header[c].value)))));
  }
  return box;
}

/* The glossary of a group's page: the mean win rate, then every metric shown in its tables in the
   schema's words (one entry per short name and description: the per-benchmark "… Jury Score" metrics
   share one), then what "-" means. */
function glossary(g) {
  const terms = new Map();   // term -> {texts: Map(description -> Set(display names)), extra}
  const add = (term, display, text, extra) => {
    const e = terms.get(term) || { texts: new Map(), extra };
    terms.set(term, e);
    if (!e.texts.has(text)) e.texts.set(text, new Set());
    if (display) e.texts.get(text).add(display);
  };
  const metrics = g.metrics || {};
  for (const t of g.tables) {
    for (let c = 1; c < t.header.length; c++) {
      if (!columnHasValue(t, c)) continue;
      const hd = t.header[c];
      const mname = (t.metrics || [])[c];
      if (hd.value === "Mean win rate" && !mname) {
        add("Mean win rate", null, hd.description || "",
          "For each benchmark column, a model's win rate is the share of the other models with a value " +
          "that it beats (a tie counts half); the mean averages these over the columns where the model has a value.");
        continue;
      }
      const m = mname ? metrics[mname] : null;
      if (!m) continue;
      const better = m.lower_is_better === true ? "Lower is better." : m.lower_is_better === false ? "Higher is better." : "";
      add(m.short_display_name || m.display_name || mname, m.display_name || mname, m.description || "", better);
    }
  }
  if (!terms.size) return null;
  add("-", null, "No value: no run of this model matched, or its runs have no value for this metric (hover a cell for which).", "");
  const entries = [];
  for (const [term, e] of terms) {
    const texts = [...e.texts].map(([text, names]) => {
      const only = names.size === 1 ? [...names][0] : null;
      return (only && only !== term ? only + ": " : "") + text;
    });
    entries.push(h("dt", {}, term), h("dd", {}, texts.map((x, i) => [i ? " " : "", markdownText(x)]), e.extra ? " " + e.extra : ""));
  }
  return h("section", { id: "glossary", class: "glossary" },
    h("h2", {}, "Glossary"),
    h("p", { class: "muted" }, "In the words of the leaderboard's schema. Hover a row's name for its benchmark and metric."),
    h("dl", {}, entries));
}

async function showGroup(name) {
  const groups = state.groups;
  name = name || groups.top;
  markSidebar(name);
  const g = await api("group", { name });
  const out = [h("h1", { id: "group-title" }, g.display_name || g.name)];
  if (g.description) out.push(h("p", { class: "desc" }, markdownText(g.description)));
  if (g.subgroups && g.subgroups.length) {
    const known = new Map(groups.groups.map(x => [x.name, x]));
    out.push(h("p", { class: "muted" }, "Includes: ",
      g.subgroups.map((sname, i) => {
        const sg = known.get(sname);
        const label = (sg && sg.display_name) || sname;
        const tip = sg && sg.description ? plainText(sg.description) : null;
        return [i ? ", " : "", sg && sg.has_tables ? h("a", { href: "#/group/" + enc(sname), title: tip }, label)
          : h("span", { title: tip }, label)];
      })));
  }
  if (!g.tables.length) out.push(h("p", { class: "note" }, "No runs of this group in " + state.meta.target + "."));
  const gloss = glossary(g);
  const tools = h("div", { class: "toolbar" },
    h("button", { id: "transpose", onclick: () => { state.transposed = !state.transposed; showGroup(name); } },
      state.transposed ? "Models as rows" : "Models as columns"),
    h("button", { id: "one-order", title: "undo the sorting of every table",
      onclick: () => { state.tableState = {}; showGroup(name); } }, "One model order"),
    state.meta.has_comparison ? h("label", {}, h("input", { type: "checkbox", id: "show-published",
      checked: state.showPublished ? "checked" : null,
      onchange: e => { state.showPublished = e.target.checked; showGroup(name); } }), " show published values") : null,
    gloss ? h("button", { id: "to-glossary", onclick: () => document.getElementById("glossary").scrollIntoView() }, "Glossary") : null,
    h("span", { id: "order-note" }, "Models in one order on every table: mean win rate on the main leaderboard, best first. " +
      "↕ sorts one table; a value opens its run's instances."));
  out.push(tools);
  g.tables.forEach((t, i) => {
    out.push(h("section", { class: "lb-section", "data-index": i },
      h("h2", {}, t.title),
      renderTable(t, g.name + "/" + i)));
  });
  if (gloss) out.push(gloss);
  setView(...out);
}

// ------------------------------------------------------------------ runs

function textBlock(text, cls) {
  const red = typeof text === "string" && text.startsWith("[redacted");
  return h("pre", { class: (cls || "") + (red ? " redacted" : "") }, text === null || text === undefined ? "" : text);
}

function instanceCard(run, inst) {
  const main = run.main_metric || {};
  const cls = "instance " + (inst.main_score === null || inst.main_score === undefined ? "" : inst.wrong ? "wrong" : "right");
  const card = h("div", { class: cls, "data-instance": inst.instance_id });
  card.appendChild(h("h3", {}, inst.instance_id, h("span", { class: "badge" }, inst.split || ""),
    main.name ? h("span", { class: "badge " + (inst.wrong ? "bad" : "ok") }, (main.display_name || main.name) + ": " + fmt(inst.main_score)) : null,
    inst.train_trial_index ? h("span", { class: "badge" }, "trial " + inst.train_trial_index) : null));
  card.appendChild(h("h4", {}, "Prompt"));
  card.appendChild(textBlock(inst.prompt, "prompt"));
  if (inst.references && inst.references.length) {
    card.appendChild(h("h4", {}, "References"));
    card.appendChild(h("ul", { class: "refs" }, inst.references.map(r =>
      h("li", { class: (r.tags || []).includes("correct") ? "correct" : "" }, r.text,
        (r.tags || []).length ? h("span", { class: "muted" }, "  [" + r.tags.join(", ") + "]") : null))));
  }
  card.appendChild(h("h4", {}, "Completion"));
  if (inst.completions && inst.completions.length) inst.completions.forEach(c => card.appendChild(textBlock(c, "completion")));
  else card.appendChild(h("p", { class: "muted" }, inst.error ? "No completion: " + inst.error : "No completion."));
  if (inst.output_mapping) {
    card.appendChild(h("p", { class: "muted" }, "Output mapping: " +
      Object.entries(inst.output_mapping).map(([k, v]) => k + " → " + v).join(", ")));
  }
  if (inst.jury && inst.jury.length) {
    card.appendChild(h("h4", {}, "Jury score"));
    card.appendChild(h("table", { class: "plain" },
      h("tr", {}, h("th", {}, "metric"), h("th", {}, "HELM value"), h("th", {}, "corrected (failed judges left out)"), h("th", {}, "judges ok")),
      inst.jury.map(j => h("tr", {}, h("td", {}, j.metric), h("td", { class: "num" }, num3(j.helm_value)),
        h("td", { class: "num" }, num3(j.corrected_value)), h("td", { class: "num" }, `${j.judges_ok} / ${j.judges_total}`)))));
  }
  if (inst.judges && inst.judges.length) {
    card.appendChild(h("h4", {}, "Judges"));
    for (const j of inst.judges) {
      const box = h("div", { class: "judge" },
        h("div", {}, h("strong", {}, j.judge), " ", h("span", { class: "badge " + j.status }, j.status),
          j.annotator ? h("span", { class: "muted" }, "  " + j.annotator) : null));
      if (j.criteria && j.criteria.length) {
        box.appendChild(h("table", { class: "plain" },
          h("tr", {}, h("th", {}, "criterion"), h("th", {}, "score"), h("th", {}, "explanation")),
          j.criteria.map(c => h("tr", {}, h("td", {}, c.name), h("td", { class: "num" }, fmt(c.score)),
            h("td", { class: c.explanation && String(c.explanation).startsWith("[redacted") ? "muted" : "" }, c.explanation || "")))));
      }
      if (j.error) box.appendChild(h("p", { class: "muted" }, "error: " + j.error));
      if (j.raw_text) box.appendChild(h("details", {}, h("summary", {}, "raw judge answer"), textBlock(j.raw_text)));
      card.appendChild(box);
    }
  }
  if (inst.stats && inst.stats.length) {
    card.appendChild(h("details", {}, h("summary", {}, `per-instance stats (${inst.stats.length})`),
      h("table", { class: "plain stats" }, h("tr", {}, h("th", {}, "stat"), h("th", {}, "split"), h("th", {}, "value")),
        inst.stats.map(st => h("tr", { class: st.name === main.name ? "main" : "" },
          h("td", {}, st.name + (st.perturbation ? " (" + st.perturbation + ")" : "") + (st.sub_split ? " [" + st.sub_split + "]" : "")),
          h("td", {}, st.split || ""), h("td", { class: "num" }, fmt(st.value)))))));
  }
  if (inst.annotations && inst.annotations.length) {
    card.appendChild(h("details", {}, h("summary", {}, "HELM annotation JSON"),
      textBlock(JSON.stringify(inst.annotations, null, 2))));
  }
  return card;
}

async function showRun(suite, runName) {
  markSidebar(null);
  const run = await api("run", suite ? { run: runName, suite } : { run: runName });
  const main = run.main_metric || {};
  const mainStat = (run.run_stats || []).find(x => x.name === main.name && (!main.split || x.split === main.split));
  const out = [h("p", { class: "muted" },
    run.benchmark ? h("a", { href: "#/group/" + enc(run.benchmark) }, run.benchmark_display_name || run.benchmark) : "run",
    " › ", run.display_name || run.model_deployment || "")];
  const words = runWords(run);
  out.push(h("h1", { id: "run-title", title: run.run_name }, words.benchmark + " · " + words.model));
  if (words.args.length) out.push(h("p", { id: "run-args", class: "run-args" },
    words.args.map(([k, v], i) => [i ? " · " : "", h("span", { class: "arg-key" }, k.replace(/_/g, " ")), ": ", v])));
  const kv = h("dl", { class: "kv" },
    h("dt", {}, "run"), h("dd", {}, h("code", { id: "run-name" }, run.run_name)),
    h("dt", {}, "suite"), h("dd", {}, run.suite),
    h("dt", {}, "model"), h("dd", {}, (run.display_name || "") + (run.model_deployment ? "  (" + run.model_deployment + ")" : "")),
    h("dt", {}, "tier"), h("dd", {}, h("span", { class: "badge " + run.tier }, run.tier),
      run.redacted ? h("span", { class: "muted" }, "  text redacted in this shareable copy")
        : (!run.shareable && !STATIC ? h("span", { class: "muted" }, "  private text: shown on this local page only, redacted by export") : null)),
    run.description ? [h("dt", {}, "run entry"), h("dd", {}, run.description)] : null,
    run.adapter_method ? [h("dt", {}, "method"), h("dd", {}, run.adapter_method)] : null,
    main.name ? [h("dt", {}, "main metric"), h("dd", { title: plainText(main.description) || null },
      (main.display_name || main.name) + " = " + num3(mainStat ? mainStat.mean : undefined) +
      (main.split ? "  (" + main.split + ")" : ""),
      main.description ? h("span", { class: "muted metric-desc" }, " — " + plainText(main.description)) : null)] : null,
    run.wrong_rule ? [h("dt", {}, "wrong answer"), h("dd", {}, run.wrong_rule)] : null,
    Object.keys(run.judge_status || {}).length ? await juryLinks(run) : null,
    Object.keys(run.judge_status || {}).length ? [h("dt", {}, "judge status"), h("dd", {},
      Object.entries(run.judge_status).map(([k, v]) => h("span", { class: "badge " + k, style: "margin-right:6px" }, k + ": " + v)))] : null);
  out.push(kv);
  for (const n of run.notes || []) out.push(h("p", { class: "note" }, n));
  const list = h("div", { id: "instances" });
  const count = h("span", { id: "instance-count", class: "muted" });
  let onlyWrong = false, query = "", shown = 20;
  const filtered = () => run.instances.filter(i => (!onlyWrong || i.wrong) &&
    (!query || [i.instance_id, i.prompt, ...(i.completions || [])].some(t => t && String(t).toLowerCase().includes(query))));
  const draw = () => {
    const items = filtered();
    count.textContent = `showing ${Math.min(shown, items.length)} of ${items.length} instances` +
      (items.length !== run.instances.length ? ` (${run.instances.length} in the run)` : "");
    list.replaceChildren(...items.slice(0, shown).map(i => instanceCard(run, i)),
      items.length > shown ? h("button", { class: "more", id: "more", onclick: () => { shown += 50; draw(); } }, "Show more") : "");
  };
  out.push(h("div", { class: "controls" },
    h("label", {}, h("input", { type: "checkbox", id: "only-wrong", onchange: e => { onlyWrong = e.target.checked; shown = 20; draw(); } }),
      ` only wrong answers (${run.n_wrong || 0})`),
    h("input", { type: "search", id: "instance-search", placeholder: "search id, prompt or completion",
      oninput: e => { query = e.target.value.trim().toLowerCase(); shown = 20; draw(); } }),
    count));
  out.push(list);
  setView(...out);
  draw();
}

/* Runs by the page's model order, then benchmark. */
function orderRuns(runs) {
  const pos = modelPosition();
  return runs.map((r, i) => [r, i]).sort(([a, ia], [b, ib]) =>
    (pos(a.display_name) - pos(b.display_name)) || benchmarkOf(a).localeCompare(benchmarkOf(b)) || ia - ib).map(([r]) => r);
}

async function showRuns(names) {
  markSidebar(null);
  const all = await api("runs");
  const wanted = names ? new Set(names) : null;
  const runs = all.filter(r => !wanted || wanted.has(r.run_name));
  setView(h("h1", {}, names ? "Runs of this cell" : "All runs"),
    h("table", { class: "plain", id: "runs-table" },
      h("tr", {}, h("th", {}, "benchmark"), h("th", {}, "model"), h("th", {}, "arguments"), h("th", {}, "suite"), h("th", {}, "tier")),
      orderRuns(runs).map(r => {
        const w = runWords(r);
        return h("tr", {}, h("td", {}, h("a", { href: runHref(r.run_name, r.suite), title: r.run_name }, w.benchmark)),
          h("td", {}, w.model), h("td", {}, w.args.map(([k, v]) => k.replace(/_/g, " ") + ": " + v).join(" · ")),
          h("td", {}, r.suite), h("td", {}, h("span", { class: "badge " + r.tier }, r.tier)));
      })));
}

// ------------------------------------------------------------------ reproduced vs published

function comparisonScatter(group) {
  const pts = group.points.map(p => ({ x: p.published, y: p.rebuilt, cls: p.equal ? "" : "diff",
    title: `${p.row} · ${p.column}\npublished ${num3(p.published)}, rebuilt ${num3(p.rebuilt)}` + (p.cause ? `\ncause: ${p.cause}` : "") }));
  return figure(group.title, scatterPlot(pts, { square: true, diagonal: true, xLabel: "published", yLabel: "reproduced", width: 320, height: 280 }));
}

async function showCompare() {
  markSidebar(null);
  const cmp = await api("comparison");
  const out = [h("h1", {}, "Reproduced vs published")];
  if (!cmp.available) {
    out.push(h("p", { class: "note", id: "no-comparison" }, "No leaderboard_comparison table in the database yet. " +
      "Import a published release (medhelm-import) to see our numbers beside the published ones."));
    return setView(...out);
  }
  if (!cmp.rows.length) {
    out.push(h("p", { class: "note", id: "no-comparison" }, `No comparison rows for ${state.meta.target}. Releases compared: ` +
      ((cmp.releases || []).join(", ") || "none") + ". Start the server with --release R to see one."));
    return setView(...out);
  }
  const sm = cmp.summary;
  out.push(h("div", { class: "cards" },
    h("div", { class: "card good" }, h("div", { class: "big", id: "n-valued-equal" }, `${sm.valued_equal}/${sm.valued}`),
      "valued cells equal (within 1e-9)"),
    h("div", { class: "card" }, h("div", { class: "big", id: "n-both-missing" }, sm.both_missing), "missing on both sides"),
    h("div", { class: "card " + (sm.differ ? "bad" : "good") }, h("div", { class: "big", id: "n-differ" }, sm.differ), "differ"),
    Object.entries(sm.causes || {}).map(([c, n]) => h("div", { class: "card" }, h("div", { class: "big" }, n), c))));
  const plots = await api("plots");
  const scat = Object.values(plots.scatter || {});
  if (scat.length) out.push(h("h2", {}, "Per benchmark"), h("div", { class: "plots" }, scat.map(comparisonScatter)));
  let onlyDiff = sm.differ > 0;
  const tableBox = h("div");
  const draw = () => {
    const rows = cmp.rows.filter(r => !onlyDiff || !r.equal);
    tableBox.replaceChildren(h("table", { class: "plain", id: "comparison-table" },
      h("tr", {}, ["group", "table", "model", "column", "published", "reproduced", "|Δ|", "verdict", "cause"].map(x => h("th", {}, x))),
      rows.slice(0, 2000).map(r => h("tr", { class: r.equal ? "" : "diff" },
        h("td", {}, h("a", { href: "#/group/" + enc(r.group_name) }, r.group_name)), h("td", {}, r.table_title),
        h("td", {}, r.row_name), h("td", {}, r.column_name),
        h("td", { class: "num" }, num3(r.published_value)), h("td", { class: "num" }, num3(r.rebuilt_value)),
        h("td", { class: "num" }, r.abs_diff === null || r.abs_diff === undefined ? "-" : String(r.abs_diff)),
        h("td", {}, r.verdict), h("td", {}, r.cause || "")))),
      rows.length > 2000 ? h("p", { class: "muted" }, `first 2000 of ${rows.length}`) : "");
  };
  out.push(h("h2", {}, "Cells"), h("div", { class: "controls" }, h("label", {},
    h("input", { type: "checkbox", id: "only-diff", checked: onlyDiff ? "checked" : null,
      onchange: e => { onlyDiff = e.target.checked; draw(); } }), " only cells that differ")), tableBox);
  setView(...out);
  draw();
}

// ------------------------------------------------------------------ plots page

/* A model's place in the page's one order (server: the main leaderboard's mean win rate, best first). */
function modelPosition() {
  const order = (state.groups && state.groups.model_order) || [];
  const at = new Map(order.map((m, i) => [m, i]));
  return m => at.has(m) ? at.get(m) : order.length;
}
function byModelOrder(items, name) {
  const pos = modelPosition();
  return items.map((x, i) => [x, i]).sort(([a, ia], [b, ib]) =>
    (pos(name(a)) - pos(name(b))) || String(name(a)).localeCompare(String(name(b))) || ia - ib).map(([x]) => x);
}

function heatmap(cells) {
  // model x category: each cell shaded by the mean win rate in the category (0 white .. 1 dark blue)
  const cats = [...new Set(cells.map(c => c.category))];
  const models = byModelOrder([...new Set(cells.map(c => c.model))], m => m);
  const at = new Map(cells.map(c => [c.model + "\u0000" + c.category, c]));
  return h("table", { class: "heatmap" },
    h("thead", {}, h("tr", {}, h("th", {}, "Model"), cats.map(c => h("th", {}, c)))),
    h("tbody", {}, models.map(m => h("tr", {}, h("th", { class: "model" }, m), cats.map(c => {
      const cell = at.get(m + "\u0000" + c);
      const w = cell ? cell.mean_win_rate : null;
      const style = w === null || w === undefined ? "" : `background: rgba(31, 91, 176, ${0.1 + 0.8 * w}); color: ${w > 0.55 ? "#fff" : "#000"}`;
      return h("td", { class: "heat", style, title: cell ? `${m} · ${c}: mean win rate ${num3(w)}, macro-average ${num3(cell.macro_avg)}` : null },
        num3(w));
    })))));
}

async function showPlots() {
  markSidebar(null);
  const p = await api("plots");
  const out = [h("h1", {}, "Plots")];
  const wr = byModelOrder(p.win_rate || [], x => x.model);
  out.push(h("h2", {}, "Mean win rate by model" + (p.win_rate_table ? " (" + p.win_rate_table + ")" : "")));
  out.push(wr.length ? h("div", { id: "plot-win-rate" }, figure("Mean win rate", barChart(wr.map(x => ({ label: x.model, value: x.value, low: x.low, high: x.high, rank_low: x.rank_low, rank_high: x.rank_high })), { max: 1 })))
    : h("p", { class: "muted" }, "No mean win rate in this leaderboard."));
  const cats = p.categories || [];
  if (cats.length) out.push(h("h2", {}, "Mean win rate by category"), h("div", { id: "plot-categories" }, heatmap(cats)));
  out.push(h("h2", {}, "Reproduced vs published, per benchmark"));
  const scat = Object.values(p.scatter || {});
  out.push(scat.length ? h("div", { class: "plots", id: "plot-scatter" }, scat.map(comparisonScatter))
    : h("p", { class: "muted", id: "plot-scatter" }, "No leaderboard_comparison rows for this target (import a published release to compare)."));
  const cost = p.cost || { points: [] };
  const unit = cost.unit === "USD" ? "cost (USD)" : "tokens (prompt + completion)";
  out.push(h("h2", {}, "Cost vs score"));
  const cpts = cost.points.filter(x => x.cost !== null && x.cost !== undefined && x.score !== null && x.score !== undefined);
  out.push(cpts.length ? h("div", { id: "plot-cost" }, figure(`${unit} vs mean win rate`,
    scatterPlot(cpts.map(x => ({ x: x.cost, y: x.score, label: x.model, title: `${x.model}: ${num3(x.cost)} ${cost.unit}, mean win rate ${num3(x.score)}` })),
      { xLabel: unit, yLabel: "mean win rate", width: 560, height: 340, zeroX: true })),
    h("p", { class: "muted" }, "source: " + cost.source + (cost.unit === "USD" ? "" : " (no dollar cost recorded for these completions)")))
    : h("p", { class: "muted", id: "plot-cost" }, "No cost or token counts for this target."));
  setView(...out);
}

// ------------------------------------------------------------------ judges: ablation and verdicts

/* A jury variant in words: `all`, `without:<judge>`, `only:<judge>` (analytics' jury_variant_scores). */
function variantWords(v) {
  if (v === "all") return "all judges";
  if (v.startsWith("without:")) return "without " + v.slice(8);
  if (v.startsWith("only:")) return v.slice(5) + " alone";
  return v;
}
function verdictsHref(benchmark, model) { return "#/jury/" + enc(benchmark) + "/" + enc(model); }
/* A jury benchmark (the jury metric's scenario_name) in words: its run group's display name, if it has one. */
function benchWords(name) {
  const g = ((state.groups && state.groups.groups) || []).find(x => x.name === name);
  return g && g.display_name ? g.display_name : name;
}

/* A rank with the move against `all` (▲ up, ▼ down); a moved rank is highlighted. */
function rankCell(rank, rankAll, tip, attrs) {
  const moved = rank !== null && rank !== undefined && rankAll !== null && rankAll !== undefined && rank !== rankAll;
  const d = moved ? rankAll - rank : 0;
  return h("td", Object.assign({ class: "num rank" + (moved ? " moved" : ""), title: tip || null }, attrs || {}),
    rank === null || rank === undefined ? "-" : String(rank),
    moved ? h("span", { class: "move" }, d > 0 ? " ▲" + d : " ▼" + (-d)) : null);
}

function ratingsLine(note, id) {
  return note ? h("p", { class: "note", id: id || "ratings-note" }, note) : null;
}

async function showJury() {
  markSidebar(null);
  const j = await api("jury");
  const out = [h("h1", { id: "jury-title" }, "Judges: ablation and verdicts")];
  out.push(h("p", { class: "desc" }, "What the leaderboard would be if the LLM jury held only some of its judges, " +
    "recomputed from the verdicts already stored (no new calls): “all judges” is the jury as it scored; “without J” " +
    "leaves judge J out; “J alone” keeps only J. Ranks: 1 is best, ties share the best rank; ▲/▼ is the move " +
    "against all judges. A benchmark's “verdicts” show every judge's score and explanation per instance, beside " +
    "the clinicians' ratings where there are any."));
  if (j.jury_note) out.push(h("p", { class: "note", id: "no-jury" }, j.jury_note));
  const r = j.ratings || {};
  out.push(ratingsLine(r.note) || h("p", { class: "muted", id: "ratings-note" },
    `${r.loaded} clinicians' ratings loaded; ${r.rated_items} judged instances of ${j.target} rated.`));
  if (j.leaderboard && j.leaderboard.length && j.variants.length) {
    const rows = byModelOrder(j.leaderboard, x => x.model_name);
    out.push(h("h2", {}, "Main leaderboard: rank by mean win rate under each jury"),
      h("div", { class: "table-wrap" }, h("table", { class: "plain jury", id: "jury-leaderboard" },
        h("tr", {}, h("th", {}, "Model"), j.variants.map(v => h("th", { "data-variant": v, title: v }, variantWords(v)))),
        rows.map(x => h("tr", { "data-model": x.model_name }, h("td", { class: "model" }, x.model_name),
          j.variants.map(v => {
            const c = x.by_variant[v] || {};
            return rankCell(c.rank, x.rank_all, c.mean_win_rate === undefined ? null :
              `mean win rate ${num3(c.mean_win_rate)} (${c.jury_columns} jury columns recomputed); rank ${x.rank_all} with all judges`,
              { "data-variant": v });
          }))))));
  }
  for (const b of j.benchmarks || []) {
    const models = byModelOrder(b.models, m => m.display_name);
    const vs = b.variants || [];
    const stab = b.stability || {};
    const foot = vs.length ? [
      h("tr", { class: "stat", "data-stat": "kendall_tau" }, h("th", { title: "Kendall's τ-b between the models' scores under all judges and under the variant" }, "Kendall's τ-b vs all"),
        vs.map(v => h("td", { class: "num", "data-variant": v }, stab[v] ? num3(stab[v].kendall_tau) : "-")), h("td")),
      h("tr", { class: "stat", "data-stat": "adjacent_swaps" }, h("th", { title: "pairs of models the variant orders the other way round" }, "swapped pairs"),
        vs.map(v => h("td", { class: "num", "data-variant": v }, stab[v] ? String(stab[v].adjacent_swaps) : "-")), h("td")),
      h("tr", { class: "stat", "data-stat": "top_k_overlap" }, h("th", { title: "models in the top 1 / 2 / 3 under both" }, "top-1/2/3 overlap"),
        vs.map(v => h("td", { class: "num", "data-variant": v }, stab[v] ? stab[v].top_k_overlap.join(" / ") : "-")), h("td")),
    ] : [];
    out.push(h("section", { class: "jury-bench", "data-benchmark": b.benchmark },
      h("h2", {}, benchWords(b.benchmark), h("span", { class: "muted" }, "  " + [b.benchmark, ...b.metrics].join(" · "))),
      b.judges.length ? h("p", { class: "muted" }, "judges: " + b.judges.join(", ")) : null,
      h("div", { class: "table-wrap" }, h("table", { class: "plain jury jury-ranks" },
        h("tr", {}, h("th", {}, "Model"), vs.map(v => h("th", { "data-variant": v, title: v }, variantWords(v))), h("th", {}, "verdicts")),
        models.map(m => {
          const all = (m.by_variant.all || {}).rank;
          return h("tr", { "data-model": m.model },
            h("td", { class: "model" }, m.display_name),
            vs.map(v => {
              const c = m.by_variant[v];
              return c ? rankCell(c.rank, all, `score ${num3(c.value)} over ${c.n_instances} instances` +
                (c.n_defaulted ? ` (${c.n_defaulted} scored the default: no judge of the variant scored them)` : ""),
                { "data-variant": v }) : h("td", { class: "num", "data-variant": v }, "-");
            }),
            h("td", {}, m.n_judged ? h("a", { href: verdictsHref(b.benchmark, m.model), class: "verdicts-link" },
              `${m.n_judged} judged · ${m.n_rated} rated`) : h("span", { class: "muted" }, "no verdicts at hand")));
        }),
        foot))));
  }
  setView(...out);
}

function verdictCard(v, inst, manyRuns) {
  const card = h("div", { class: "instance verdict", "data-instance": inst.instance_id, "data-run": inst.run_name });
  card.appendChild(h("h3", {}, inst.instance_id,
    manyRuns ? h("span", { class: "badge", title: inst.run_name }, inst.suite) : null,
    inst.clinicians.length ? h("span", { class: "badge ok" }, `rated by ${inst.clinicians.length} clinician${inst.clinicians.length === 1 ? "" : "s"}`) : null,
    h("a", { href: runHref(inst.run_name, inst.suite), class: "muted" }, "prompt and completion")));
  const judges = inst.judges;
  const head = h("tr", {}, h("th", {}, "criterion"),
    judges.map(j => h("th", { "data-judge": j.judge }, j.judge, j.status !== "ok" ? h("span", { class: "badge " + j.status }, " " + j.status) : null)),
    h("th", { title: "the mean of the judges' scores" }, "jury (mean)"),
    h("th", { title: "the mean of the clinicians' ratings; each rating in file order below" }, "clinicians"));
  const rows = v.criteria.map(c => {
    const rated = v.dimensions.includes(c);
    const ratings = rated ? inst.clinicians.map(x => x[c]).filter(x => x !== null && x !== undefined) : [];
    return h("tr", { "data-criterion": c }, h("th", {}, c),
      judges.map(j => {
        const got = (j.criteria || []).find(x => x.name === c);
        if (!got) return h("td", { class: "muted", "data-judge": j.judge }, j.status === "ok" ? "-" : j.status);
        const red = typeof got.explanation === "string" && got.explanation.startsWith("[redacted");
        return h("td", { "data-judge": j.judge },
          h("div", { class: "score" }, fmt(got.score)),
          // model output: a text node, never HTML
          h("div", { class: "explanation" + (red ? " muted" : "") }, got.explanation || ""));
      }),
      h("td", { class: "num jury-mean" }, fmt(inst.jury[c])),
      h("td", { class: "num clinicians" }, rated && ratings.length ? [fmt(inst.clinicians_mean[c]),
        h("div", { class: "muted ratings" }, ratings.map(fmt).join(", "))] : "-"));
  });
  card.appendChild(h("table", { class: "plain verdict-table" }, h("thead", {}, head), h("tbody", {}, rows)));
  for (const j of judges) if (j.error) card.appendChild(h("p", { class: "muted judge-error" }, j.judge + ": " + j.error));
  return card;
}

async function showVerdicts(benchmark, model) {
  markSidebar(null);
  const v = await api("verdicts", { benchmark, model });
  const out = [h("p", { class: "muted" }, h("a", { href: "#/jury" }, "Judges"), " › ", benchmark)];
  out.push(h("h1", { id: "verdicts-title", title: benchmark }, benchWords(benchmark) + " · " + (v.display_name || v.model)));
  out.push(h("dl", { class: "kv" },
    h("dt", {}, "model"), h("dd", {}, v.model + (v.model_deployment && v.model_deployment !== v.model ? "  (" + v.model_deployment + ")" : "")),
    h("dt", {}, "runs"), h("dd", {}, v.runs.map((r, i) => [i ? " · " : "", h("a", { href: runHref(r.run_name, r.suite), title: r.run_name }, r.suite),
      " ", h("span", { class: "badge " + r.tier }, r.tier)])),
    h("dt", {}, "judges"), h("dd", {}, v.judges.join(", ")),
    h("dt", {}, "clinicians' item"), h("dd", {}, `dataset_name ${v.benchmark}, model_key ${v.model_key}, instance_id`),
    v.redacted ? [h("dt", {}, "text"), h("dd", { class: "muted" }, "judge explanations of non-public runs redacted in this shareable copy")] : null));
  out.push(ratingsLine(v.ratings_note) || h("p", { class: "muted", id: "ratings-note" },
    `${v.n_rated} of ${v.instances.length} instances rated by clinicians.`));
  const list = h("div", { id: "verdicts" });
  const count = h("span", { id: "verdict-count", class: "muted" });
  const manyRuns = v.runs.length > 1;
  let onlyRated = false, query = "", shown = 20;
  const filtered = () => v.instances.filter(i => (!onlyRated || i.clinicians.length) &&
    (!query || [i.instance_id, ...i.judges.flatMap(j => (j.criteria || []).map(c => c.explanation))]
      .some(t => t && String(t).toLowerCase().includes(query))));
  const draw = () => {
    const items = filtered();
    count.textContent = `showing ${Math.min(shown, items.length)} of ${items.length} instances` +
      (items.length !== v.instances.length ? ` (${v.instances.length} judged)` : "");
    list.replaceChildren(...items.slice(0, shown).map(i => verdictCard(v, i, manyRuns)),
      items.length > shown ? h("button", { class: "more", id: "more", onclick: () => { shown += 50; draw(); } }, "Show more") : "");
  };
  out.push(h("div", { class: "controls" },
    h("label", {}, h("input", { type: "checkbox", id: "only-rated", onchange: e => { onlyRated = e.target.checked; shown = 20; draw(); } }),
      ` only instances clinicians rated (${v.n_rated})`),
    h("input", { type: "search", id: "verdict-search", placeholder: "search id or explanation",
      oninput: e => { query = e.target.value.trim().toLowerCase(); shown = 20; draw(); } }),
    count));
  out.push(list);
  setView(...out);
  draw();
}

/* On a run page: links to its jury's verdicts view (the benchmarks whose verdicts list this run). */
async function juryLinks(run) {
  let j;
  try { j = await api("jury"); } catch (e) { return null; }
  const links = [];
  for (const b of j.benchmarks || []) {
    for (const m of b.models) {
      if (m.n_judged && (m.runs || []).includes(run.run_name)) {
        links.push(h("a", { href: verdictsHref(b.benchmark, m.model), class: "verdicts-link" },
          `every judge's verdict on ${benchWords(b.benchmark)} for ${m.display_name}, beside clinicians' ratings`));
      }
    }
  }
  return links.length ? [h("dt", {}, "judges"), h("dd", { id: "run-verdicts" }, links.map((a, i) => [i ? " · " : "", a]))] : null;
}

// ------------------------------------------------------------------ shell

function renderSidebar() {
  const side = document.getElementById("sidebar");
  const gs = state.groups.groups;
  const byName = new Map(gs.map(g => [g.name, g]));
  const link = (g, cls) => h("li", { class: (cls || "") + (g.has_tables ? "" : " none") },
    g.has_tables ? h("a", { href: "#/group/" + enc(g.name), "data-group": g.name, title: plainText(g.description) || null }, g.display_name)
      : h("a", { title: [plainText(g.description), "(no runs)"].filter(Boolean).join("\n") }, g.display_name));
  const top = byName.get(state.groups.top);
  const parts = [];
  if (top) parts.push(h("h3", {}, "Leaderboard"), h("ul", {}, link(top)));
  const cats = gs.filter(g => g.kind === "category");
  const placed = new Set();
  if (cats.length) {
    parts.push(h("h3", {}, "Categories"));
    const ul = h("ul");
    for (const c of cats) {
      ul.appendChild(link(c));
      for (const sname of c.subgroups) {
        const b = byName.get(sname);
        if (b && b.has_tables) { ul.appendChild(link(b, "sub")); placed.add(sname); }
      }
    }
    parts.push(ul);
  }
  const rest = gs.filter(g => g.kind === "benchmark" && g.has_tables && !placed.has(g.name));
  if (rest.length) parts.push(h("h3", {}, "Benchmarks"), h("ul", {}, rest.map(g => link(g))));
  side.replaceChildren(...parts);
}

function markSidebar(name) {
  document.querySelectorAll("#sidebar a[data-group]").forEach(a => a.classList.toggle("active", a.dataset.group === name));
}

function markNav(which) {
  document.querySelectorAll("#mainnav a").forEach(a => a.classList.toggle("active", a.dataset.nav === which));
}

async function route() {
  const hash = location.hash && location.hash.length > 1 ? location.hash.slice(1) : "/";
  const [path, query] = hash.split("?");
  const parts = path.split("/").slice(1).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  document.body.dataset.ready = "";
  try {
    if (parts[0] === "run") { markNav("runs"); await showRun(parts[1] || null, parts.slice(2).join("/")); }
    else if (parts[0] === "runs") { markNav("runs"); await showRuns(params.get("names") ? params.get("names").split("|") : null); }
    else if (parts[0] === "compare") { markNav("compare"); await showCompare(); }
    else if (parts[0] === "plots") { markNav("plots"); await showPlots(); }
    else if (parts[0] === "jury") {
      markNav("jury");
      if (parts[1]) await showVerdicts(parts[1], parts.slice(2).join("/"));
      else await showJury();
    }
    else { markNav("group"); await showGroup(parts[0] === "group" ? parts[1] : null); }
    document.body.dataset.ready = path;
  } catch (err) {
    showError(err);
    document.body.dataset.ready = "error";
  }
}

async function main() {
  try {
    state.meta = await api("meta");
    state.groups = await api("groups");
    const runs = await api("runs");
    for (const r of runs) state.runIndex[r.run_name] = r;
  } catch (err) {
    showError(err);
    document.body.dataset.ready = "error";
    return;
  }
  const m = state.meta;
  document.getElementById("target").textContent = `${m.mode} ${m.target}` + (m.suites.length > 1 || m.mode === "release" ? ` (suites: ${m.suites.join(", ")})` : "")
    + ((m.editions || []).length ? ` · edition ${m.editions.join(", ")}` : "");
  const priv = document.getElementById("privacy");
  const nPrivate = Object.entries(m.tiers || {}).filter(([t]) => t !== "public").reduce((a, [, n]) => a + n, 0);
  if (STATIC) { priv.className = "privacy shared"; priv.textContent = "shareable copy: private-tier text redacted"; }
  else if (nPrivate) { priv.className = "privacy local"; priv.textContent = `local page: text of ${nPrivate} non-public runs shown in full`;
    priv.title = "tiers: " + Object.entries(m.tiers || {}).map(([t, n]) => `${t} ${n}`).join(", ") +
      ". medhelm-server export writes a copy with this text redacted."; }
  document.title = `MedHELM — ${m.target}`;
  renderSidebar();
  window.addEventListener("hashchange", route);
  await route();
}

main();
