// The controller's web UI (package webui). Plain JavaScript, no build
// step: it opens the event stream /ui/events (one JSON snapshot a second,
// the latest at once), loads the history /ui/api/history once per page
// and extends it with every snapshot, and draws the pages with uPlot:
// #/tenants, #/tenant/NAME, #/topology, #/appliances, #/agents.
//
// For tests: <body data-status> is "live" once a snapshot is drawn;
// #updated carries data-seq (the snapshot's number); tenant rows are
// tr.tenant[data-tenant], with the class "below" when the tenant is below
// its guarantee; errors go to <html data-errors>.
(function () {
  "use strict";

  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  var MAX_VM_CHARTS = 24;
  // Time axis steps (seconds): the history is one sample a second.
  var TIME_INCRS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

  var state = {
    snap: null, // the latest snapshot
    hist: null, // the history, extended by every snapshot
    pending: [], // snapshots that came before the history
    route: { page: "tenants", name: "" },
    es: null,
    esTenant: null,
    retry: null,
    charts: {}, // uPlot instances by id
    drawn: "", // the page the main element holds
    rows: {} // tenant rows by name (tenants page)
  };
  var errors = [];

  function fail(e) {
    errors.push(String((e && e.message) || e));
    document.documentElement.setAttribute("data-errors", errors.join(" | "));
  }
  window.addEventListener("error", function (e) { fail(e.message || e); });

  // ---- formatting

  function num(v, unit, scale) {
    if (v == null || isNaN(v)) return "–";
    var a = Math.abs(v), i = 0;
    var prefixes = ["", "K", "M", "G", "T", "P"];
    while (a >= scale && i < prefixes.length - 1) {
      a /= scale;
      v /= scale;
      i++;
    }
    var s = a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a === 0 ? "0" : v.toFixed(2);
    return s + " " + prefixes[i] + unit;
  }
  function fmtRate(bps) { return num(bps, "bps", 1000); }
  function fmtTokens(t) { return num(t, "T/s", 1000); }
  function fmtPct(x) {
    if (x == null || isNaN(x) || !isFinite(x)) return "–";
    return (x * 100).toFixed(x < 0.1 ? 1 : 0) + "%";
  }
  function fmtAge(sec) {
    if (sec == null || isNaN(sec)) return "never";
    if (sec < 1) return "now";
    if (sec < 90) return sec.toFixed(0) + " s ago";
    if (sec < 5400) return (sec / 60).toFixed(0) + " min ago";
    return (sec / 3600).toFixed(1) + " h ago";
  }
  function fmtSpan(sec) {
    if (!sec) return "–";
    if (sec < 90) return sec.toFixed(0) + " s";
    return (sec / 60).toFixed(sec < 600 ? 1 : 0) + " min";
  }
  function fmtTime(d) {
    function two(n) { return (n < 10 ? "0" : "") + n; }
    return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
  }

  // ---- DOM

  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        var v = attrs[k];
        if (v == null || v === false) return;
        if (k === "text") e.textContent = v;
        else if (k === "class") e.className = v;
        else e.setAttribute(k, v === true ? "" : v);
      });
    }
    (children || []).forEach(function (c) {
      if (c == null) return;
      e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return e;
  }
  function clear(e) {
    while (e.firstChild) e.removeChild(e.firstChild);
  }
  function td(text, cls) { return el("td", { text: text, class: cls }); }
  function th(text, cls, title) { return el("th", { text: text, class: cls, title: title }); }
  function table(head, id, caption) {
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(h.nodeType ? h : th(h)); });
    return el("table", { id: id }, [caption ? el("caption", { text: caption }) : null, el("thead", null, [tr]), el("tbody")]);
  }
  function bar(frac, text) {
    var lvl = frac == null ? "none" : frac >= 0.95 ? "full" : frac >= 0.8 ? "high" : frac >= 0.5 ? "mid" : "low";
    var fill = el("span", { class: "fill lvl-" + lvl });
    fill.style.width = frac == null ? "0" : Math.min(100, Math.max(0, frac * 100)).toFixed(1) + "%";
    return el("span", { class: "barwrap" }, [el("span", { class: "bar" }, [fill]), el("span", { class: "bartext", text: text })]);
  }
  function tenantLink(name) { return el("a", { href: "#/tenant/" + encodeURIComponent(name), text: name }); }

  // ---- charts

  function destroyCharts() {
    Object.keys(state.charts).forEach(function (id) { state.charts[id].u.destroy(); });
    state.charts = {};
  }

  // chart draws or updates uPlot chart id in box: series [{label, color,
  // dash, fmt}], data [x, y1, ...].
  function chart(id, box, o, data) {
    var c = state.charts[id];
    var key = JSON.stringify(o.series.map(function (s) { return s.label; }));
    if (c && c.key === key && box.contains(c.u.root)) {
      c.u.setData(data);
      return;
    }
    if (c) c.u.destroy();
    clear(box);
    var fmt = o.fmt || fmtRate;
    var opts = {
      width: o.width || Math.max(280, Math.min(box.clientWidth || 900, 1160)),
      height: o.height || 220,
      scales: { x: { time: !o.spark }, y: { range: function (u, mn, mx) { return [0, mx > 0 ? mx * 1.1 : 1]; } } },
      series: [{ label: "time", value: function (u, v) { return v == null ? "–" : fmtTime(new Date(v * 1000)); } }].concat(o.series.map(function (s) {
        return {
          label: s.label,
          stroke: s.color,
          width: s.width || (s.dash ? 1.2 : 1.6),
          dash: s.dash,
          fill: s.fill,
          spanGaps: false,
          points: { show: false },
          value: function (u, v) { return (s.fmt || fmt)(v); }
        };
      })),
      axes: [{ space: 70, incrs: TIME_INCRS, values: function (u, vals) { return vals.map(function (v) { return fmtTime(new Date(v * 1000)); }); } },
        { size: 80, values: function (u, vals) { return vals.map(function (v) { return fmt(v); }); } }],
      legend: { live: true }
    };
    if (o.spark) {
      opts.axes = [{ show: false }, { show: false }];
      opts.legend = { show: false };
      opts.cursor = { show: false };
      opts.select = { show: false };
      opts.padding = [2, 2, 2, 2];
    }
    var u = new uPlot(opts, data, box);
    box.setAttribute("data-drawn", "1");
    state.charts[id] = { u: u, key: key };
  }

  // ---- history

  // eachSeries calls f(holder, field) for every series of the history.
  function eachSeries(h, f) {
    Object.keys(h.tenants).forEach(function (n) { ["achieved", "guarantee", "below"].forEach(function (k) { f(h.tenants[n], k); }); });
    Object.keys(h.vms).forEach(function (n) { ["received", "sent"].forEach(function (k) { f(h.vms[n], k); }); });
    Object.keys(h.appliances).forEach(function (n) {
      var a = h.appliances[n];
      f(a, "throughput");
      f(a, "estimate");
      Object.keys(a.tenants).forEach(function (t) { f(a.tenants, t); });
    });
  }

  function nulls(n) {
    var a = new Array(n);
    for (var i = 0; i < n; i++) a[i] = null;
    return a;
  }

  // normalize gives every series as many values as there are times.
  function normalize(h) {
    h.tenants = h.tenants || {};
    h.vms = h.vms || {};
    h.appliances = h.appliances || {};
    Object.keys(h.appliances).forEach(function (n) { h.appliances[n].tenants = h.appliances[n].tenants || {}; });
    var n = h.t.length;
    eachSeries(h, function (o, k) {
      var s = o[k] || [];
      while (s.length < n) s.unshift(null);
      o[k] = s;
    });
  }

  // extend appends a snapshot to the history, as the server records it.
  function extend(s) {
    var h = state.hist;
    var t = Date.parse(s.time) / 1000;
    if (h.t.length && t <= h.t[h.t.length - 1]) return;
    var n = h.t.length;
    function put(o, k, v) {
      if (!o[k]) o[k] = nulls(n);
      o[k].push(v == null ? null : v);
    }
    h.t.push(t);
    s.tenants.forEach(function (tn) {
      var o = h.tenants[tn.name] || (h.tenants[tn.name] = {});
      put(o, "achieved", tn.achieved);
      put(o, "guarantee", tn.guarantee);
      put(o, "below", tn.achieved == null ? null : tn.below ? 1 : 0);
      (tn.vms || []).forEach(function (vm) {
        var v = h.vms[vm.name] || (h.vms[vm.name] = {});
        put(v, "received", vm.received);
        put(v, "sent", vm.sent);
      });
    });
    s.appliances.forEach(function (a) {
      var o = h.appliances[a.name] || (h.appliances[a.name] = { tenants: {} });
      put(o, "throughput", a.throughput);
      put(o, "estimate", a.estimate);
      (a.tenants || []).forEach(function (at) { if (at.used != null) put(o.tenants, at.tenant, at.used); });
    });
    // Series the snapshot did not mention have no value now.
    eachSeries(h, function (o, k) { if (o[k].length < h.t.length) o[k].push(null); });
    var keep = Math.max(1, Math.round((s.historySeconds || 600) / (h.interval || 1)));
    if (h.t.length > keep) {
      var d = h.t.length - keep;
      h.t.splice(0, d);
      eachSeries(h, function (o, k) { o[k].splice(0, d); });
    }
  }

  function series(o, k) {
    return o && o[k] ? o[k] : nulls(state.hist ? state.hist.t.length : 0);
  }

  // ---- the stream

  function connect() {
    var tenant = state.route.page === "tenant" ? state.route.name : "";
    if (state.es && state.esTenant === tenant && state.es.readyState !== 2) return;
    if (state.es) state.es.close();
    clearTimeout(state.retry);
    state.esTenant = tenant;
    state.hist = null;
    state.pending = [];
    var q = tenant ? "?tenant=" + encodeURIComponent(tenant) : "";
    var es = new EventSource("events" + q);
    state.es = es;
    es.addEventListener("snapshot", function (ev) {
      if (es !== state.es) return;
      try {
        onSnapshot(JSON.parse(ev.data));
      } catch (e) {
        fail(e);
      }
    });
    es.onopen = function () { setLive(true, "live"); };
    es.onerror = function () {
      if (es !== state.es) return;
      setLive(false, es.readyState === 2 ? "disconnected" : "reconnecting…");
      if (es.readyState === 2) {
        // Refused (the session expired, or the controller restarted):
        // ask for the snapshot to tell which.
        fetch("api/snapshot", { credentials: "same-origin", cache: "no-store" }).then(function (r) {
          if (r.status === 401) location.reload(); // the login form
        }, function () {});
        state.retry = setTimeout(function () { state.es = null; connect(); }, 3000);
      }
    };
    fetch("api/history" + q, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 401) {
        location.reload();
        return null;
      }
      if (!r.ok) throw new Error("history: HTTP " + r.status);
      return r.json();
    }).then(function (h) {
      if (!h || es !== state.es) return;
      normalize(h);
      state.hist = h;
      state.pending.forEach(extend);
      state.pending = [];
      render();
    }).catch(fail);
  }

  function setLive(on, text) {
    var e = document.getElementById("live");
    e.textContent = text;
    e.className = "live " + (on ? "on" : "off");
  }

  function onSnapshot(s) {
    state.snap = s;
    if (state.hist) extend(s);
    else state.pending.push(s);
    render();
  }

  // ---- pages

  function render() {
    var s = state.snap;
    if (!s) return;
    var up = document.getElementById("updated");
    up.textContent = "updated " + fmtTime(new Date(s.time)) + " · #" + s.seq;
    up.setAttribute("data-seq", String(s.seq));
    up.setAttribute("data-time", s.time);
    renderBanner(s);
    var notes = document.getElementById("notes");
    clear(notes);
    (s.notes || []).forEach(function (n) { notes.appendChild(el("p", { class: "note", text: n })); });
    Array.prototype.forEach.call(document.querySelectorAll("nav a"), function (a) {
      var p = a.getAttribute("data-page");
      a.className = p === state.route.page || (p === "tenants" && state.route.page === "tenant") ? "active" : "";
    });
    var main = document.getElementById("main");
    var page = state.route.page + "/" + state.route.name;
    if (state.drawn !== page) {
      destroyCharts();
      clear(main);
      state.rows = {};
      state.drawn = page;
    }
    switch (state.route.page) {
      case "tenant": renderTenant(main, s); break;
      case "topology": renderTopology(main, s); break;
      case "appliances": renderAppliances(main, s); break;
      case "agents": renderAgents(main, s); break;
      default: renderTenants(main, s);
    }
    document.body.setAttribute("data-status", "live");
  }

  function renderBanner(s) {
    var b = document.getElementById("banner");
    clear(b);
    var c = s.controller;
    if (c.leading) {
      b.hidden = true;
      return;
    }
    b.hidden = false;
    b.appendChild(el("b", { text: "This controller follows; it does not lead. " }));
    b.appendChild(document.createTextNode("Only the leader has the agents' reports: rates, compliance and agents' state are the leader's to show, and are blank here. "));
    if (c.leader) {
      var href = /^https?:\/\//.test(c.leader) ? c.leader.replace(/\/$/, "") + "/ui/" : null;
      b.appendChild(document.createTextNode("The leader is "));
      b.appendChild(href ? el("a", { href: href, id: "leader", text: c.leader }) : el("code", { id: "leader", text: c.leader }));
      b.appendChild(document.createTextNode("."));
    } else {
      b.appendChild(document.createTextNode("No leader is known yet."));
    }
  }

  function ratio(a, b) { return a == null || !b ? null : a / b; }

  function renderTenants(main, s) {
    var tbl = document.getElementById("tenants");
    if (!tbl) {
      main.appendChild(el("h1", { text: "Tenants" }));
      main.appendChild(el("p", { class: "summary", id: "tenants-summary" }));
      tbl = table([th(""), th("Tenant"), th("VMs", "num"), th("Guarantee", "num", "the sum of its VMs' receive guarantees"),
        th("Achieved now", "num", "what its VMs received in the agents' latest reports"),
        th("Mean", "num", "achieved, averaged over the controller's history"), th("Worst 1 s", "num", "the lowest one-second achieved in the history"),
        th("Below", "num", "seconds below its guarantee in the history"), th("Compliance", "num", "fraction of seconds, since the tenant was applied, not below its guarantee"),
        th("Last minutes")], "tenants");
      main.appendChild(tbl);
      main.appendChild(el("p", { class: "note", text: "A tenant is below its guarantee when, in the latest second, one of its VMs received less than 95% of its guarantee while a limiter toward it or a full link into its host held it back (the rule of bulkhead get tenants); such tenants come first, marked." }));
    }
    var below = s.tenants.filter(function (t) { return t.below; }).length;
    var sum = document.getElementById("tenants-summary");
    sum.textContent = s.tenants.length + " tenants, " + below + " below their guarantee" +
      (s.controller.mechanism ? " · mechanism " + s.controller.mechanism : "");
    sum.className = "summary" + (below ? " alarm" : "");
    var body = tbl.tBodies[0];
    var seen = {};
    s.tenants.forEach(function (t) {
      seen[t.name] = true;
      var r = state.rows[t.name];
      if (!r) {
        var spark = el("div", { class: "spark" });
        r = { tr: el("tr", { "data-tenant": t.name }), cells: [], spark: spark };
        for (var i = 0; i < 9; i++) {
          var c = el("td", { class: i >= 2 ? "num" : i === 0 ? "marker" : null });
          r.cells.push(c);
          r.tr.appendChild(c);
        }
        r.cells[1].appendChild(tenantLink(t.name));
        r.tr.appendChild(el("td", null, [spark]));
        state.rows[t.name] = r;
      }
      r.tr.className = "tenant" + (t.below ? " below" : "");
      r.cells[0].textContent = t.below ? "▼ below" : "";
      r.cells[0].title = t.below ? "below its guarantee in the latest second" : "";
      r.cells[2].textContent = t.vmCount;
      r.cells[3].textContent = t.bestEffort ? "best effort" : fmtRate(t.guarantee);
      r.cells[4].textContent = fmtRate(t.achieved);
      r.cells[5].textContent = fmtRate(t.mean);
      r.cells[5].title = t.meanSeconds ? "over " + fmtSpan(t.meanSeconds) : "";
      r.cells[6].textContent = fmtRate(t.worst);
      r.cells[7].textContent = t.achieved == null && !t.belowSeconds ? "–" : t.belowSeconds + " s";
      r.cells[8].textContent = fmtPct(t.compliance);
      body.appendChild(r.tr); // in the snapshot's order: below first
      if (state.hist) {
        var h = state.hist.tenants[t.name];
        chart("spark-" + t.name, r.spark, {
          spark: true, width: 160, height: 34, series: [
            { label: "achieved", color: t.below ? "#d62728" : "#4e79a7", fill: t.below ? "rgba(214,39,40,0.12)" : "rgba(78,121,167,0.12)" }]
        }, [state.hist.t, series(h, "achieved")]);
      }
    });
    Object.keys(state.rows).forEach(function (n) {
      if (seen[n]) return;
      var c = state.charts["spark-" + n];
      if (c) {
        c.u.destroy();
        delete state.charts["spark-" + n];
      }
      body.removeChild(state.rows[n].tr);
      delete state.rows[n];
    });
  }

  function section(main, id, title) {
    var sec = document.getElementById(id);
    if (!sec) {
      sec = el("section", { id: id }, [el("h2", { text: title })]);
      main.appendChild(sec);
    }
    return sec;
  }

  function box(parent, id, title) {
    var b = document.getElementById(id);
    if (!b) {
      b = el("div", { class: "chart", id: id });
      parent.appendChild(el("div", { class: "chartbox" }, [el("h3", { text: title }), b]));
    }
    return b;
  }

  // fillTable replaces a table's rows.
  function fillTable(tbl, rows) {
    var body = tbl.tBodies[0];
    clear(body);
    rows.forEach(function (r) { body.appendChild(r); });
  }

  function renderTenant(main, s) {
    var name = state.route.name;
    var t = null;
    s.tenants.forEach(function (x) { if (x.name === name) t = x; });
    if (!document.getElementById("tenant-head")) {
      main.appendChild(el("p", { class: "crumbs" }, [el("a", { href: "#/tenants", text: "← Tenants" })]));
      main.appendChild(el("h1", { id: "tenant-head", text: "Tenant " + name }));
      main.appendChild(el("p", { id: "tenant-status", class: "summary" }));
    }
    var st = document.getElementById("tenant-status");
    if (!t) {
      st.textContent = "No tenant named " + name + " is declared.";
      return;
    }
    st.textContent = (t.below ? "▼ Below its guarantee. " : t.achieved == null ? "No fresh report from its agents. " : "Not below its guarantee. ") +
      "Guarantee " + (t.bestEffort ? "none (best effort)" : fmtRate(t.guarantee)) + ", achieved " + fmtRate(t.achieved) +
      ", mean " + fmtRate(t.mean) + " over " + fmtSpan(t.meanSeconds) +
      ", worst second " + fmtRate(t.worst) + ", compliance " + fmtPct(t.compliance) + ".";
    st.className = "summary" + (t.below ? " alarm" : "");
    var hist = state.hist;
    var over = section(main, "tenant-over-time", "Over time");
    if (hist) {
      var h = hist.tenants[name];
      chart("tenant", box(over, "chart-tenant", "Received by the tenant's VMs, against its guarantee"), {
        series: [{ label: "achieved", color: PALETTE[0] }, { label: "guarantee (sum of its VMs' receive guarantees)", color: "#555", dash: [8, 4] }]
      }, [hist.t, series(h, "achieved"), series(h, "guarantee")]);
    }
    // VMs.
    var vsec = section(main, "tenant-vms", "VMs");
    var vt = document.getElementById("vms");
    if (!vt) {
      vt = table([th("VM"), th("Host"), th("In guarantee", "num"), th("Out guarantee", "num"), th("Received", "num"),
        th("Sent", "num"), th("Received of in-hose", "num", "what it received over its in-hose: the most it can be guaranteed to receive, what it is guaranteed when its senders want that much (a VM that only sends receives nothing and is not below)")], "vms");
      vsec.appendChild(vt);
    }
    var vms = t.vms || [];
    fillTable(vt, vms.map(function (v) {
      return el("tr", { class: "vm", "data-vm": v.name }, [td(v.name), td(v.host), td(fmtRate(v.in), "num"),
        td(fmtRate(v.out), "num"), td(fmtRate(v.received), "num"), td(fmtRate(v.sent), "num"), td(fmtPct(ratio(v.received, v.in)), "num")]);
    }));
    if (hist) {
      var grid = document.getElementById("vm-charts");
      if (!grid) {
        grid = el("div", { id: "vm-charts", class: "grid" });
        vsec.appendChild(grid);
        if (vms.length > MAX_VM_CHARTS) vsec.appendChild(el("p", { class: "note", text: "Charts of the first " + MAX_VM_CHARTS + " of " + vms.length + " VMs." }));
      }
      vms.slice(0, MAX_VM_CHARTS).forEach(function (v) {
        var vh = hist.vms[v.name];
        var n = hist.t.length;
        var inG = nulls(n).map(function () { return v.in; });
        var outG = nulls(n).map(function () { return v.out; });
        chart("vm-" + v.name, box(grid, "chart-vm-" + v.name, v.name + " on " + v.host), {
          width: 540, height: 170, series: [
            { label: "received", color: PALETTE[0] }, { label: "sent", color: PALETTE[1] },
            { label: "in guarantee", color: PALETTE[0], dash: [8, 4], width: 1 }, { label: "out guarantee", color: PALETTE[1], dash: [2, 3], width: 1 }]
        }, [hist.t, series(vh, "received"), series(vh, "sent"), inG, outG]);
      });
    }
    // VDC.
    if (t.vdc && t.vdc.length) {
      var dsec = section(main, "tenant-vdc", "Virtual datacenter: appliances");
      var dt = document.getElementById("vdc");
      if (!dt) {
        dt = table([th("Appliance"), th("Guarantee", "num"), th("Max", "num"), th("Used now", "num"), th("of guarantee", "num")], "vdc");
        dsec.appendChild(dt);
      }
      fillTable(dt, t.vdc.map(function (g) {
        return el("tr", null, [td(g.appliance), td(fmtTokens(g.guarantee), "num"), td(g.max ? fmtTokens(g.max) : "–", "num"),
          td(fmtTokens(g.used), "num"), td(fmtPct(ratio(g.used, g.guarantee)), "num")]);
      }));
      if (hist) {
        t.vdc.forEach(function (g) {
          var ah = hist.appliances[g.appliance];
          var n = hist.t.length;
          chart("vdc-" + g.appliance, box(dsec, "chart-vdc-" + g.appliance, "Use of " + g.appliance + " against the VDC guarantee"), {
            fmt: fmtTokens, series: [{ label: "used", color: PALETTE[4] }, { label: "guarantee", color: "#555", dash: [8, 4] }]
          }, [hist.t, ah ? series(ah.tenants, name) : nulls(n), nulls(n).map(function () { return g.guarantee; })]);
        });
      }
    }
  }

  function renderTopology(main, s) {
    var tbl = document.getElementById("links");
    if (!tbl) {
      main.appendChild(el("h1", { text: "Topology: links" }));
      main.appendChild(el("p", { class: "note", text: "Each direction of a link, the most utilized first. Utilization of a server's access link is what its VMs sent (server→switch) or received (switch→server), from the VMs' interface counters in the agents' latest reports (traffic between two VMs of one server counts, though it stays in the server). Other links carry the VM pair rates the agents report, routed as admission reserves them; flows to appliances are not counted there. Reserved is what admission reserved on the link for the tenants' hose guarantees." }));
      tbl = table([th("Link"), th("Capacity", "num"), th("Utilization"), th("Reserved"), th("Tenants reserving")], "links");
      main.appendChild(tbl);
    }
    fillTable(tbl, s.links.map(function (l) {
      var u = ratio(l.used, l.capacity), r = ratio(l.reserved, l.capacity);
      var utext = l.used == null ? "not measured" : fmtPct(u) + " · " + fmtRate(l.used) + (l.source === "pairs" ? " (VM pairs)" : "");
      return el("tr", { class: "link" + (u != null && u >= 0.9 ? " congested" : ""), "data-link": l.name }, [
        td(l.name), td(fmtRate(l.capacity), "num"), el("td", null, [bar(u, utext)]),
        el("td", null, [bar(r, fmtPct(r) + " · " + fmtRate(l.reserved))]),
        td((l.reservations || []).map(function (x) { return x.tenant + " " + fmtRate(x.rate); }).join(", ") || "–")]);
    }));
  }

  function renderAppliances(main, s) {
    if (!document.getElementById("appliances-head")) {
      main.appendChild(el("h1", { id: "appliances-head", text: "Appliances" }));
      main.appendChild(el("p", { class: "note", text: "Throughput is what the tenants' flows to an appliance used in the agents' latest reports, in the appliance's tokens per second (its virtual cost); the capacity estimate is the central controller's at its latest step (Pulsar)." }));
    }
    if (!s.appliances.length) {
      if (!document.getElementById("no-appliances")) main.appendChild(el("p", { id: "no-appliances", text: "No appliance is declared." }));
      return;
    }
    s.appliances.forEach(function (a) {
      var sec = section(main, "app-" + a.name, a.name + (a.hypervisor ? " (in every hypervisor)" : a.server ? " behind " + a.server : ""));
      var sum = document.getElementById("app-sum-" + a.name);
      if (!sum) {
        sum = el("p", { class: "summary", id: "app-sum-" + a.name });
        sec.appendChild(sum);
      }
      sum.textContent = "Throughput " + fmtTokens(a.throughput) + ", capacity estimate " + fmtTokens(a.estimate) +
        (a.capacityMin || a.capacityMax ? " (bounds " + fmtTokens(a.capacityMin) + " – " + fmtTokens(a.capacityMax) + ")" : "") +
        (a.estimate ? ", utilization " + fmtPct(ratio(a.throughput, a.estimate)) : "") + ".";
      var tid = "app-tenants-" + a.name;
      var tt = document.getElementById(tid);
      if (!tt) {
        tt = table([th("Tenant"), th("VDC guarantee", "num"), th("Used now", "num"), th("Share of throughput", "num"), th("of guarantee", "num")], tid);
        sec.appendChild(tt);
      }
      fillTable(tt, (a.tenants || []).map(function (x) {
        return el("tr", null, [el("td", null, [tenantLink(x.tenant)]), td(x.guarantee ? fmtTokens(x.guarantee) : "–", "num"),
          td(fmtTokens(x.used), "num"), td(fmtPct(ratio(x.used, a.throughput)), "num"), td(fmtPct(ratio(x.used, x.guarantee)), "num")]);
      }));
      var hist = state.hist;
      if (hist) {
        var ah = hist.appliances[a.name];
        var ser = [{ label: "throughput", color: "#333" }, { label: "capacity estimate", color: PALETTE[2], dash: [8, 4] }];
        var data = [hist.t, series(ah, "throughput"), series(ah, "estimate")];
        (a.tenants || []).forEach(function (x, i) {
          ser.push({ label: x.tenant, color: PALETTE[(i + 3) % PALETTE.length] });
          data.push(ah ? series(ah.tenants, x.tenant) : nulls(hist.t.length));
        });
        chart("app-" + a.name, box(sec, "chart-app-" + a.name, "Throughput and capacity estimate (tokens/s)"), { fmt: fmtTokens, series: ser }, data);
      }
    });
  }

  function renderAgents(main, s) {
    var tbl = document.getElementById("agents");
    if (!tbl) {
      main.appendChild(el("h1", { text: "Agents" }));
      main.appendChild(el("p", { class: "summary", id: "agents-summary" }));
      tbl = table([th("Host"), th("Connected"), th("Last report"), th("VMs", "num"), th("Model revision", "num", "the store revision of the model the agent enforces (it moves only when the host's part changes)"), th("Steps", "num"),
        th("Step time", "num", "the mechanism's mean step"), th("Dropped messages", "num", "peers' messages dropped, by reason"),
        th("Limit failures", "num", "limiter and scheduler writes the data path refused"), th("Version")], "agents");
      main.appendChild(tbl);
    }
    var now = Date.parse(s.time) / 1000;
    var lead = s.controller.leading;
    var up = 0;
    fillTable(tbl, s.agents.map(function (a) {
      // A follower has no sessions and no reports: blanks, not zeros.
      function known(text) { return lead ? text : "–"; }
      var age = a.lastReport ? now - Date.parse(a.lastReport) / 1000 : null;
      var silent = lead && (!a.connected || age == null || age > 10);
      if (lead && !silent) up++;
      var dropped = 0, reasons = [];
      Object.keys(a.dropped || {}).sort().forEach(function (k) {
        dropped += a.dropped[k];
        reasons.push(k + " " + a.dropped[k]);
      });
      var d = td(known(String(dropped)), "num");
      d.title = reasons.join(", ");
      return el("tr", { class: "agent" + (silent ? " down" : ""), "data-host": a.host }, [td(a.host),
        td(known(a.connected ? "yes" : "no")), td(known(fmtAge(age))), td(String(a.vms), "num"),
        td(a.revision ? String(a.revision) : "–", "num"),
        td(known(String(a.steps)), "num"), td(a.stepSeconds ? (a.stepSeconds * 1000).toFixed(2) + " ms" : "–", "num"), d,
        td(known(String(a.limitFailures)), a.limitFailures ? "num alarm" : "num"), td(a.version || "–")]);
    }));
    var sum = document.getElementById("agents-summary");
    sum.textContent = (lead ? up + " of " + s.agents.length + " agents connected and reporting" : s.agents.length + " hosts declared; their agents report to the leader") +
      (s.controller.central ? " · central controller: " + s.controller.central.steps + " steps, latest " +
        (s.controller.central.stepSeconds * 1000).toFixed(2) + " ms, " + s.controller.central.flows + " flows" : "");
    sum.className = "summary" + (lead && up < s.agents.length ? " alarm" : "");
  }

  // ---- routing

  function route() {
    var h = location.hash.replace(/^#\/?/, "");
    var i = h.indexOf("/");
    var page = i < 0 ? h : h.slice(0, i);
    var name = i < 0 ? "" : decodeURIComponent(h.slice(i + 1));
    if (["tenants", "tenant", "topology", "appliances", "agents"].indexOf(page) < 0) page = "tenants";
    state.route = { page: page, name: page === "tenant" ? name : "" };
    connect();
    render();
  }

  window.addEventListener("hashchange", route);
  if (typeof uPlot === "undefined") {
    fail("uPlot did not load");
    return;
  }
  route();
})();
