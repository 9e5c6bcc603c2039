// Draws report.html's charts with uPlot from the JSON in #report-data
// (report/html.go writes both). Each chart's container gets data-drawn="1"
// and data-series (its series' labels, as JSON) once uPlot has drawn it;
// <body> gets data-status="drawn" (or "error") and data-charts (the count).
(function () {
  "use strict";
  var errors = window.reportErrors || [];
  function fail(e) {
    errors.push(String((e && e.message) || e));
    document.documentElement.setAttribute("data-errors", errors.join(" | "));
  }
  var data;
  try {
    data = JSON.parse(document.getElementById("report-data").textContent);
  } catch (e) {
    fail(e);
    document.body.setAttribute("data-status", "error");
    return;
  }

  function fmt(v) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v);
    if (a >= 1000) return v.toFixed(0);
    if (a >= 100) return v.toFixed(1);
    if (a >= 1) return v.toFixed(2);
    if (a === 0) return "0";
    return v.toPrecision(3);
  }

  function tick(v) {
    return v == null ? "" : String(Math.round(v * 1000) / 1000);
  }

  function chartWidth(el) {
    return Math.max(320, Math.min(el.clientWidth || 900, 1160));
  }

  function seriesOpts(s) {
    var o = {
      label: s.label,
      stroke: s.color,
      width: 1.6,
      spanGaps: false,
      points: { show: false },
      value: function (u, v) { return fmt(v); }
    };
    switch (s.style) {
      case "dash":
        o.dash = [8, 4];
        o.width = 1.3;
        break;
      case "dot":
        o.dash = [2, 3];
        o.width = 1.3;
        break;
      case "bar":
        o.fill = s.color;
        o.width = 1;
        o.paths = uPlot.paths.bars({ size: [0.85, 90], align: 0 });
        break;
      case "mark":
        o.paths = function () { return null; };
        o.points = { show: true, space: 0, size: 11, width: 2.5, stroke: s.color, fill: "#ffffff" };
        break;
    }
    return o;
  }

  function opts(c, width) {
    var o = {
      width: width,
      height: c.kind === "bars" ? 320 : 280,
      series: [{ label: c.xlabel || "group", value: function (u, v) { return c.kind === "bars" ? groupAt(c, v) : fmt(v); } }].concat(c.series.map(seriesOpts)),
      scales: {
        x: { time: false },
        y: { range: function (u, mn, mx) { return [0, mx > 0 ? mx * 1.08 : 1]; } }
      },
      axes: [{ label: c.xlabel }, { label: c.ylabel, size: 70, values: function (u, sp) { return sp.map(tick); } }],
      legend: { live: true }
    };
    if (c.kind === "bars") {
      var n = c.x.length;
      o.scales.x.range = function () { return [-0.7, n - 0.3]; };
      o.cursor = { drag: { x: false, y: false } };
      o.axes[0] = {
        label: c.xlabel,
        grid: { show: false },
        ticks: { show: false },
        size: 60,
        splits: function () { return c.centers; },
        values: function (u, sp) { return sp.map(function (v) { return groupAt(c, v); }); }
      };
    } else {
      o.cursor = { sync: { key: "bulkhead-time" } };
    }
    return o;
  }

  function groupAt(c, v) {
    if (v == null) return "";
    var best = -1, bd = Infinity;
    for (var i = 0; i < (c.centers || []).length; i++) {
      var dd = Math.abs(c.centers[i] - v);
      if (dd < bd) { bd = dd; best = i; }
    }
    return best >= 0 ? c.groups[best] : "";
  }

  var sections = {};
  document.querySelectorAll(".charts[data-section]").forEach(function (el) {
    sections[el.getAttribute("data-section")] = el;
  });
  var plots = [];
  var drawn = 0;
  (data.charts || []).forEach(function (c) {
    var box = document.createElement("div");
    box.className = "chart";
    box.id = "chart-" + c.id;
    var h = document.createElement("h3");
    h.textContent = c.title;
    box.appendChild(h);
    (sections[c.section] || document.getElementById("charts")).appendChild(box);
    try {
      var d = [c.x].concat(c.series.map(function (s) { return s.values; }));
      var u = new uPlot(opts(c, chartWidth(box)), d, box);
      plots.push({ u: u, box: box });
      box.setAttribute("data-drawn", "1");
      box.setAttribute("data-series", JSON.stringify(u.series.slice(1).map(function (s) { return s.label; })));
      drawn++;
    } catch (e) {
      fail(e);
      box.setAttribute("data-drawn", "0");
    }
  });
  window.addEventListener("resize", function () {
    plots.forEach(function (p) { p.u.setSize({ width: chartWidth(p.box), height: p.u.height }); });
  });
  document.body.setAttribute("data-charts", String(drawn));
  document.body.setAttribute("data-status", errors.length ? "error" : "drawn");
})();
