/* dpwatch dashboard: draws the charts of a monitor's checks and of a snapshot with uPlot.
 * The data comes from /ui/data/... (JSON, already thinned on the server). No inline script, so
 * that the pages' Content-Security-Policy can forbid it. */
(function () {
  "use strict";

  var EVENT_COLORS = { reset: "#1e7a46", rediscovery: "#6b4fa0", contract: "#a15c00", change: "#1d4f91" };
  var charts = [];

  var C = {
    stat: "#1d4f91", threshold: "#c0392b", alarm: "#c0392b", z: "#5b4b8a", p: "#1d4f91",
    boundary: "#c0392b", q: "#8a8f98", prev: "#8a8f98", lb: "#b9770e", eps: "#1d4f91",
    grid: "rgba(0,0,0,0.07)", failed: "#9b2d20", gap: "rgba(120,120,120,0.18)"
  };

  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "—";
    digits = digits || 3;
    var a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(digits - 1);
    return a >= 1 ? String(Number(v.toPrecision(digits))) : v.toFixed(digits).replace(/0+$/, "").replace(/\.$/, "");
  }

  function utc(ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); }

  function axes(yLabel, xLabel, integerX) {
    var x = { stroke: "#555", grid: { stroke: C.grid }, ticks: { stroke: C.grid }, space: 48 };
    if (xLabel) { x.label = xLabel; x.labelSize = 22; }
    if (integerX) x.values = function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? String(v) : ""; }); };
    return [
      x,
      { stroke: "#555", grid: { stroke: C.grid }, ticks: { stroke: C.grid }, label: yLabel, size: 56,
        values: function (u, vals) { return vals.map(function (v) { return fmt(v, 3); }); } }
    ];
  }

  function hatch(ctx) {
    var c = document.createElement("canvas");
    c.width = c.height = 8;
    var g = c.getContext("2d");
    g.strokeStyle = "rgba(110,110,110,0.35)";
    g.lineWidth = 1;
    g.beginPath(); g.moveTo(0, 8); g.lineTo(8, 0); g.stroke();
    return ctx.createPattern(c, "repeat");
  }

  /* By period t: stretches without periods (hatched, between the periods they fell between),
   * failed periods (✕ at the top), events (a dotted line with its label: reset, re-discovery,
   * contract breach, mechanism updated) and the alarm's period (a dashed line and a diamond with
   * its label), so that they read without colour. */
  function vmark(u, X, color, dash, label, row) {
    var ctx = u.ctx, b = u.bbox, px = window.devicePixelRatio || 1;
    if (X < b.left || X > b.left + b.width) return;
    ctx.strokeStyle = color; ctx.setLineDash(dash.map(function (v) { return v * px; })); ctx.lineWidth = 1.2 * px;
    ctx.beginPath(); ctx.moveTo(X, b.top); ctx.lineTo(X, b.top + b.height); ctx.stroke(); ctx.setLineDash([]);
    if (!label) return;
    ctx.font = (11 * px) + "px sans-serif";
    var tw = ctx.measureText(label).width, left = X > b.left + b.width * 0.7;
    var lx = left ? X - tw - 4 * px : X + 4 * px, ly = b.top + (24 + 13 * (row || 0)) * px;
    ctx.fillStyle = "rgba(255,255,255,0.85)"; ctx.fillRect(lx - 2 * px, ly - 10 * px, tw + 4 * px, 13 * px);
    ctx.fillStyle = color; ctx.textAlign = "left"; ctx.fillText(label, lx, ly);
  }

  function marks(d, withAlarmPoint, withLabels) {
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, b = u.bbox;
          ctx.save();
          ctx.fillStyle = hatch(ctx);
          (d.gaps_t || []).forEach(function (g) {
            var x0 = Math.max(b.left, u.valToPos(g[0], "x", true));
            var x1 = Math.min(b.left + b.width, u.valToPos(g[1], "x", true));
            if (x1 > x0) ctx.fillRect(x0, b.top, Math.max(x1 - x0, 2), b.height);
          });
          ctx.restore();
        }],
        draw: [function (u) {
          var ctx = u.ctx, b = u.bbox, px = window.devicePixelRatio || 1;
          ctx.save();
          ctx.fillStyle = C.failed;
          ctx.font = (11 * px) + "px sans-serif";
          ctx.textAlign = "center";
          (d.failed.marks_t || []).forEach(function (t) {
            if (t === null) return;
            var x = u.valToPos(t, "x", true);
            if (x >= b.left && x <= b.left + b.width) ctx.fillText("✕", x, b.top + 11 * px);
          });
          (d.events || []).forEach(function (e, i) {
            if (e.t === null) return;
            vmark(u, u.valToPos(e.t, "x", true), EVENT_COLORS[e.kind] || "#555", [2, 3], withLabels ? e.label : null, i % 3);
          });
          if (d.alarm && d.alarm.t !== null && d.alarm.t !== undefined) {
            var ax = u.valToPos(d.alarm.t, "x", true);
            if (ax >= b.left && ax <= b.left + b.width) {
              vmark(u, ax, C.alarm, [4, 3], null);
              if (withAlarmPoint) {
                var ay = u.valToPos(d.alarm.statistic, "y", true), s = 6 * px;
                ctx.fillStyle = C.alarm;
                ctx.beginPath(); ctx.moveTo(ax, ay - s); ctx.lineTo(ax + s, ay); ctx.lineTo(ax, ay + s); ctx.lineTo(ax - s, ay);
                ctx.closePath(); ctx.fill();
                /* The label goes in the band above the plot (the chart's top padding), at the alarm's line:
                 * never over the periods it summarises. */
                ctx.font = "bold " + (12 * px) + "px sans-serif";
                ctx.textAlign = "left";
                var label = "◆ alarm at t = " + d.alarm.t, tw = ctx.measureText(label).width;
                var lx = Math.max(b.left, Math.min(ax - tw / 2, b.left + b.width - tw));
                var ly = b.top - 7 * px;
                ctx.fillStyle = C.alarm;
                ctx.fillText(label, lx, ly);
              }
            }
          }
          ctx.restore();
        }]
      }
    };
  }

  function width(el) { return Math.max(200, el.clientWidth || el.parentNode.clientWidth || 800); }

  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function stamp(ts) {
    if (ts === null || ts === undefined) return "";
    var d = new Date(ts * 1e3);
    return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " +
      pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes()) + ":" + pad(d.getUTCSeconds()) + " UTC";
  }

  function keep(u, el) { charts.push([u, el]); return u; }

  /* A check's chart: x is the period t (titled), the period's time shows in the legend on hover. */
  function periodOpts(el, height, yLabel, series, d, withAlarmPoint, syncKey, withLabels) {
    var when = {};
    d.t.forEach(function (t, i) { when[t] = d.x[i]; });
    return {
      width: width(el), height: height,
      padding: withAlarmPoint && d.alarm ? [24, null, null, null] : undefined,
      cursor: { sync: { key: syncKey }, drag: { x: true, y: false } },
      scales: { x: { time: false } },
      axes: axes(yLabel, "period t", true),
      series: [{ label: "period t", value: function (u, v) { return v === null || v === undefined ? "—" : "t = " + v + (when[v] ? " · " + stamp(when[v]) : ""); } }].concat(series),
      plugins: [marks(d, withAlarmPoint, withLabels)],
      legend: { live: true }
    };
  }

  function drawChecks(group) {
    var note = group.querySelector(".chart-note");
    fetch(group.dataset.seriesUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (d) {
        if (!d.periods) {
          note.textContent = "No period in this horizon yet" + (d.failed.count ? " (" + d.failed.count + " failed)." : ".");
          group.querySelectorAll("figure").forEach(function (f) { f.hidden = true; });
          return;
        }
        var text = d.periods + (d.periods === 1 ? " period" : " periods");
        if (d.points < d.periods) text += ", drawn as " + d.points + " points (smallest and largest per bucket; the alarm's period is kept)";
        if (d.failed.count) text += "; " + d.failed.count + " failed";
        if (d.gaps.length) text += "; " + d.gaps.length + " stretch" + (d.gaps.length > 1 ? "es" : "") + " without periods";
        if (d.events && d.events.length) text += "; marked: " + d.events.map(function (e) { return e.label + " (t ≈ " + Math.round(e.t) + ")"; }).join(", ");
        note.textContent = text + ".";
        var key = "check-" + d.check_id;
        var el = group.querySelector(".chart-stat");
        keep(new uPlot(periodOpts(el, 220, "Mₜ", [
          { label: "Mₜ", stroke: C.stat, width: 2, value: function (u, v) { return fmt(v, 4); } },
          { label: "threshold", stroke: C.threshold, width: 1.5, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } }
        ], d, true, key, true), [d.t, d.statistic, d.threshold], el), el);
        el = group.querySelector(".chart-z");
        keep(new uPlot(periodOpts(el, 150, "zₜ", [
          { label: "zₜ", stroke: C.z, width: 1.5, value: function (u, v) { return fmt(v, 3); } },
          { label: "0", stroke: "#999", width: 1, dash: [2, 3], value: function () { return ""; } }
        ], d, false, key, false), [d.t, d.z, d.t.map(function () { return 0; })], el), el);
        el = group.querySelector(".chart-p");
        var boundary = d.boundary || d.t.map(function () { return null; });
        keep(new uPlot(periodOpts(el, 170, "probability", [
          { label: "p̂ (x in E)", stroke: C.p, width: 2, value: function (u, v) { return fmt(v, 4); } },
          { label: "boundary " + d.claim, stroke: C.boundary, width: 1.5, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } },
          { label: "q̂ (x′ in E)", stroke: C.q, width: 1, value: function (u, v) { return fmt(v, 4); } }
        ], d, false, key, false), [d.t, d.p_hat, boundary, d.q_hat], el), el);
        if (!d.boundary) {
          var warn = document.createElement("p");
          warn.className = "muted small";
          warn.textContent = "The claim " + d.claim + " has no single-event boundary to draw.";
          el.parentNode.appendChild(warn);
        }
      })
      .catch(function (e) { note.textContent = "Could not load the periods (" + e.message + ")."; });
  }

  function constant(xs, v) { return xs.map(function () { return v; }); }

  function section(root, title) {
    var s = document.createElement("section");
    s.className = "card";
    var h = document.createElement("h2");
    h.textContent = title;
    s.appendChild(h);
    root.appendChild(s);
    return s;
  }

  function figure(parent, caption) {
    var f = document.createElement("figure");
    var c = document.createElement("figcaption");
    c.textContent = caption;
    var div = document.createElement("div");
    div.className = "chart";
    f.appendChild(c); f.appendChild(div); parent.appendChild(f);
    return div;
  }

  function plain(el, height, xLabel, yLabel, series, data, extra) {
    var opts = {
      width: width(el), height: height,
      scales: { x: { time: false } },
      axes: axes(yLabel, xLabel, false),
      series: [{ label: xLabel, value: extra && extra.xValue }].concat(series),
      legend: { live: true },
      plugins: extra && extra.plugins ? extra.plugins : []
    };
    if (extra && extra.xValues) opts.axes[0].values = extra.xValues;
    return keep(new uPlot(opts, data, el), el);
  }

  function vline(x, label, color) {
    return { hooks: { draw: [function (u) {
      if (x === null || x === undefined) return;
      var ctx = u.ctx, b = u.bbox, px = window.devicePixelRatio || 1, X = u.valToPos(x, "x", true);
      if (X < b.left || X > b.left + b.width) return;
      ctx.save();
      ctx.strokeStyle = color; ctx.setLineDash([6 * px, 4 * px]); ctx.lineWidth = 1.5 * px;
      ctx.beginPath(); ctx.moveTo(X, b.top); ctx.lineTo(X, b.top + b.height); ctx.stroke();
      ctx.setLineDash([]); ctx.fillStyle = color; ctx.font = (11 * px) + "px sans-serif";
      ctx.fillText(" " + label, X, b.top + 12 * px);
      ctx.restore();
    }] } };
  }

  function drawSnapshot(root) {
    var note = root.querySelector(".chart-note");
    fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (d) {
        note.remove();
        d.pairs.forEach(function (p, i) {
          var s = section(root, "Pair " + i + (p.position !== null && p.position !== undefined ? " (check " + p.position + ")" : ""));
          var summary = document.createElement("p");
          summary.innerHTML = "";
          summary.textContent = "ε̂ = " + fmt(p.epsilon_hat, 4) + ", LB = " + fmt(p.lower_bound, 4) + ", claim " + d.claim +
            (p.previous ? " · previous snapshot: ε̂ = " + fmt(p.previous.epsilon_hat, 4) + ", LB = " + fmt(p.previous.lower_bound, 4) : "");
          s.appendChild(summary);
          p.curves.forEach(function (c) {
            var el = figure(s, "Privacy loss |ln fₓ − ln fₓ′| over the " + c.axis + (p.previous ? " (dashed: previous snapshot)" : ""));
            var series = [
              { label: "loss now", stroke: C.stat, width: 2, spanGaps: true, value: function (u, v) { return fmt(v, 4); },
                points: { show: !!c.labels, size: 9, fill: C.stat }, paths: c.labels ? function () { return null; } : undefined },
              { label: "ε̂", stroke: C.eps, width: 1, dash: [2, 3], value: function (u, v) { return fmt(v, 4); } },
              { label: "LB", stroke: C.lb, width: 1.5, dash: [8, 3], value: function (u, v) { return fmt(v, 4); } }
            ];
            var data = [c.x, c.loss, constant(c.x, p.epsilon_hat), constant(c.x, p.lower_bound)];
            if (d.claim_epsilon !== null) {
              series.push({ label: "claim ε", stroke: C.threshold, width: 2, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } });
              data.push(constant(c.x, d.claim_epsilon));
            }
            if (c.previous_loss) {
              series.push({ label: "loss before", stroke: C.prev, width: 1.5, dash: [4, 4], spanGaps: true,
                value: function (u, v) { return fmt(v, 4); }, points: { show: !!c.labels, size: 7 },
                paths: c.labels ? function () { return null; } : undefined });
              data.push(c.previous_loss);
            }
            var extra = {};
            if (c.labels) {
              extra.xValues = function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) && c.labels[v] !== undefined ? c.labels[v] : ""; }); };
              extra.xValue = function (u, v) { return v === null || c.labels[v] === undefined ? "—" : c.labels[v]; };
            }
            plain(el, 240, c.labels ? "outcome" : "output", "loss", series, data, extra);
          });
          if (p.profile) {
            var el = figure(s, "Empirical privacy profile δ̂(ε)" + (p.previous && p.previous.profile ? " (dashed: previous snapshot)" : ""));
            var series = [{ label: "δ̂ now", stroke: C.stat, width: 2, value: function (u, v) { return fmt(v, 4); } }];
            var data = [p.profile.epsilons, p.profile.delta];
            if (p.previous && p.previous.profile) {
              series.push({ label: "δ̂ before", stroke: C.prev, width: 1.5, dash: [4, 4], value: function (u, v) { return fmt(v, 4); } });
              data.push(p.previous.profile.delta);
            }
            if (d.claim_delta) {
              series.push({ label: "claim δ", stroke: C.threshold, width: 1, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } });
              data.push(constant(p.profile.epsilons, d.claim_delta));
            }
            plain(el, 200, "ε", "δ", series, data, { plugins: [vline(d.claim_epsilon, "claim ε = " + fmt(d.claim_epsilon, 3), C.threshold)] });
          }
        });
        d.pairs.forEach(function (p, i) {
          if (!p.tradeoff || !p.tradeoff.alpha || !p.tradeoff.alpha.length) return;
          var s = root.querySelectorAll("section.card")[i];
          var el = figure(s, "Trade-off curve: type II error β against type I error α on the pair's events; the claim "
            + (p.claim_description || d.claim) + " allows only points on or above its curve f(α)" + (p.refutes ? " (points below it refute the claim)" : ""));
          plain(el, 240, "α (type I error)", "β", [
            { label: "empirical β", stroke: C.stat, width: 0, points: { show: true, size: 6, fill: C.stat }, paths: function () { return null; },
              value: function (u, v) { return fmt(v, 4); } },
            { label: "claim f(α)", stroke: C.threshold, width: 2, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } }
          ], [p.tradeoff.alpha, p.tradeoff.beta, p.tradeoff.f], { xValue: function (u, v) { return v === null || v === undefined ? "—" : "α = " + fmt(v, 4); } });
        });
        if (d.history && d.history.length > 1) {
          var s = section(root, "How the estimates changed over this monitor's snapshots");
          var el = figure(s, "ε̂ and LB per snapshot");
          var xs = d.history.map(function (h) { return h.x; });
          var series = [
            { label: "ε̂", stroke: C.stat, width: 2, points: { show: true }, value: function (u, v) { return fmt(v, 4); } },
            { label: "LB", stroke: C.lb, width: 2, dash: [8, 3], points: { show: true }, value: function (u, v) { return fmt(v, 4); } }
          ];
          var data = [xs, d.history.map(function (h) { return h.epsilon_hat; }), d.history.map(function (h) { return h.lower_bound; })];
          if (d.claim_epsilon !== null) {
            series.push({ label: "claim ε", stroke: C.threshold, width: 1.5, dash: [6, 4], value: function (u, v) { return fmt(v, 4); } });
            data.push(constant(xs, d.claim_epsilon));
          }
          new uPlot({ width: width(el), height: 200, tzDate: utc, scales: { x: { time: true } }, axes: axes("ε", "taken (UTC)", false),
            series: [{ label: "taken (UTC)" }].concat(series) }, data, el);
        }
      })
      .catch(function (e) { note.textContent = "Could not load the curves (" + e.message + ")."; });
  }

  /* Auto-refresh (list and monitor pages): a toggle, remembered per page in this browser. */
  function autoRefresh() {
    document.querySelectorAll("input.auto-refresh").forEach(function (box) {
      var key = "dpwatch-refresh:" + location.pathname, timer = null;
      function arm() {
        if (timer) { clearTimeout(timer); timer = null; }
        if (box.checked) timer = setTimeout(function () { location.reload(); }, 1000 * Number(box.dataset.seconds || 15));
      }
      try { box.checked = localStorage.getItem(key) === "on"; } catch (e) { /* storage off */ }
      box.addEventListener("change", function () {
        try { localStorage.setItem(key, box.checked ? "on" : "off"); } catch (e) { /* storage off */ }
        arm();
      });
      arm();
    });
  }

  var resizing = null;
  window.addEventListener("resize", function () {
    if (resizing) clearTimeout(resizing);
    resizing = setTimeout(function () {
      charts.forEach(function (c) { c[0].setSize({ width: width(c[1]), height: c[0].height }); });
    }, 150);
  });

  document.addEventListener("DOMContentLoaded", function () {
    autoRefresh();
    if (typeof uPlot === "undefined") return;
    document.querySelectorAll(".charts[data-series-url]").forEach(drawChecks);
    var snap = document.getElementById("snapshot-charts");
    if (snap) drawSnapshot(snap);
  });
})();
