/* onnxroof HTML report: fills the layer table from the page's JSON, sorts and filters it, and ties its rows to
   the layers' points in the figures (hover shows a point's numbers, a click highlights the row and the points). */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const table = document.getElementById("layer-table");
  const tooltip = document.getElementById("tooltip");
  const opFilter = document.getElementById("op-filter");
  const boundFilter = document.getElementById("bound-filter");
  const nameFilter = document.getElementById("name-filter");
  const analysisSelect = document.getElementById("analysis-select");
  const rowCount = document.getElementById("row-count");
  const BOUND_ORDER = ["compute", "memory", "overhead", "none"];

  /* Numbers with units, three significant digits, as the terminal report writes them. */
  function sig(value) { return String(Number(value.toPrecision(3))); }
  function si(value, unit) {
    if (value === null || value === undefined) return "-";
    if (value === 0) return ("0 " + unit).trim();
    const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [factor, prefix] of prefixes) {
      if (Math.abs(value) >= factor) return sig(value / factor) + " " + prefix + unit;
    }
    return (sig(value) + " " + unit).trim();
  }
  function time(value) {
    if (value === null || value === undefined) return "-";
    if (value === 0) return "0";
    const units = [[1, "s"], [1e-3, "ms"], [1e-6, "us"]];
    for (const [factor, unit] of units) {
      if (value >= factor) return sig(value / factor) + " " + unit;
    }
    return sig(value * 1e9) + " ns";
  }
  function percent(value) { return value === null ? "-" : (100 * value).toFixed(1) + "%"; }

  /* The table's columns: key in a row object, heading, whether numeric, how a value is written. */
  const COLUMNS = [
    { key: "index", label: "#", num: true, show: (v) => String(v) },
    { key: "name", label: "layer", css: "name" },
    { key: "op", label: "op type", css: "op" },
    { key: "precision", label: "precision" },
    { key: "flops", label: "FLOPs", num: true, show: (v) => si(v, "FLOP") },
    { key: "bytes", label: "memory traffic", num: true, show: (v) => si(v, "B") },
    { key: "params", label: "params", num: true, show: (v) => si(v, "") },
    { key: "intensity", label: "FLOP/B", num: true, show: (v) => (v === null ? "-" : sig(v)) },
    { key: "bound", label: "bound", badge: true },
    { key: "predicted_s", label: "predicted", num: true, show: time },
    { key: "share", label: "share", num: true, show: percent },
  ];
  const MEASURED = [
    { key: "measured_s", label: "measured", num: true, show: time },
    { key: "ratio", label: "predicted / measured", num: true, show: (v) => (v === null ? "-" : v.toFixed(2) + "x") },
  ];

  const analyses = data.analyses.map(function (analysis) {
    const names = data.columns.concat(analysis.measured ? data.measured_columns : []);
    const rows = analysis.rows.map(function (values) {
      const row = {};
      names.forEach((name, i) => { row[name] = values[i]; });
      if (analysis.measured) {
        row.ratio = row.measured_s > 0 ? row.predicted_s / row.measured_s : null;
      }
      return row;
    });
    return { label: analysis.label, measured: analysis.measured, rows: rows };
  });

  /* Every hover target of every figure, by layer name (compared as strings, never put into a selector). */
  const targetsByLayer = new Map();
  document.querySelectorAll(".figure-svg .target").forEach(function (target) {
    const layer = target.getAttribute("data-layer");
    if (!targetsByLayer.has(layer)) targetsByLayer.set(layer, []);
    targetsByLayer.get(layer).push(target);
  });

  const state = { analysis: 0, sortKey: "index", descending: false, selected: null };

  function columns() {
    return analyses[state.analysis].measured ? COLUMNS.concat(MEASURED) : COLUMNS;
  }

  function fillSelect(select, values) {
    const keep = select.value;
    while (select.options.length > 1) select.remove(1);
    values.forEach(function (value) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      select.appendChild(option);
    });
    select.value = values.includes(keep) ? keep : "";
  }

  function renderHeader() {
    const head = table.tHead;
    head.textContent = "";
    const tr = head.insertRow();
    columns().forEach(function (column) {
      const th = document.createElement("th");
      th.textContent = column.label;
      th.dataset.key = column.key;
      if (column.num) th.className = "num";
      th.title = "sort by " + column.label;
      if (column.key === state.sortKey) th.setAttribute("aria-sort", state.descending ? "descending" : "ascending");
      th.addEventListener("click", function () {
        state.descending = state.sortKey === column.key ? !state.descending : Boolean(column.num && column.key !== "index");
        state.sortKey = column.key;
        render();
      });
      tr.appendChild(th);
    });
  }

  function compare(a, b) {
    const x = a[state.sortKey];
    const y = b[state.sortKey];
    if (x === y) return a.index - b.index;
    if (x === null || x === undefined) return 1; /* missing values last in both directions */
    if (y === null || y === undefined) return -1;
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return state.descending ? -order : order;
  }

  function visible(row) {
    const query = nameFilter.value.trim().toLowerCase();
    return (!opFilter.value || row.op === opFilter.value) &&
      (!boundFilter.value || row.bound === boundFilter.value) &&
      (!query || row.name.toLowerCase().includes(query));
  }

  function renderBody() {
    const rows = analyses[state.analysis].rows.filter(visible).sort(compare);
    const body = document.createElement("tbody");
    rows.forEach(function (row) {
      const tr = document.createElement("tr");
      tr.dataset.layer = row.name;
      if (!row.supported) tr.classList.add("unsupported");
      if (row.name === state.selected) tr.classList.add("highlight");
      columns().forEach(function (column) {
        const td = document.createElement("td");
        const value = row[column.key];
        if (column.badge) {
          const badge = document.createElement("span");
          badge.className = "bound bound-" + value;
          badge.textContent = value;
          td.appendChild(badge);
        } else {
          td.textContent = column.show ? column.show(value) : String(value);
        }
        if (column.num) td.className = "num";
        if (column.css) td.classList.add(column.css);
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.replaceChild(body, table.tBodies[0]);
    const total = analyses[state.analysis].rows.length;
    rowCount.textContent = rows.length === total ? total + " layers" : rows.length + " of " + total + " layers";
  }

  function render() { renderHeader(); renderBody(); }

  function chooseAnalysis(index) {
    state.analysis = index;
    const rows = analyses[index].rows;
    fillSelect(opFilter, Array.from(new Set(rows.map((r) => r.op))).sort());
    const bounds = new Set(rows.map((r) => r.bound));
    fillSelect(boundFilter, BOUND_ORDER.filter((b) => bounds.has(b)).concat(
      Array.from(bounds).filter((b) => !BOUND_ORDER.includes(b))));
    render();
  }

  /* Selecting a layer: its row and its points in every figure are highlighted. */
  function select(layer, scrollTo) {
    state.selected = layer;
    document.querySelectorAll(".figure-svg .target.highlight").forEach((t) => t.classList.remove("highlight"));
    (targetsByLayer.get(layer) || []).forEach((t) => t.classList.add("highlight"));
    let row = null;
    table.tBodies[0].querySelectorAll("tr").forEach(function (tr) {
      const match = tr.dataset.layer === layer;
      tr.classList.toggle("highlight", match);
      if (match && !row) row = tr;
    });
    if (scrollTo === "figure") {
      const first = (targetsByLayer.get(layer) || [])[0];
      if (first) first.closest("figure").scrollIntoView({ block: "center" });
    } else if (scrollTo === "row") {
      if (!row && analyses[state.analysis].rows.some((r) => r.name === layer)) {
        opFilter.value = ""; boundFilter.value = ""; nameFilter.value = ""; /* the row was filtered out */
        renderBody();
        row = Array.from(table.tBodies[0].rows).find((tr) => tr.dataset.layer === layer) || null;
      }
      if (row) row.scrollIntoView({ block: "center" });
    }
  }

  table.addEventListener("click", function (event) {
    const tr = event.target.closest("tbody tr");
    if (tr) select(tr.dataset.layer, "figure");
  });

  document.querySelectorAll(".figure-svg").forEach(function (svg) {
    svg.addEventListener("mouseover", function (event) {
      const target = event.target.closest(".target");
      if (!target) return;
      const layer = target.getAttribute("data-layer");
      const tip = target.getAttribute("data-tip") || "";
      tooltip.textContent = tip.startsWith(layer) ? tip : layer + "\n" + tip;
      tooltip.hidden = false;
      place(event);
    });
    svg.addEventListener("mousemove", function (event) {
      if (!tooltip.hidden) place(event);
    });
    svg.addEventListener("mouseout", function (event) {
      if (event.target.closest(".target")) tooltip.hidden = true;
    });
    svg.addEventListener("click", function (event) {
      const target = event.target.closest(".target");
      if (target) select(target.getAttribute("data-layer"), "row");
    });
  });

  /* The tooltip next to the pointer, kept inside the window. */
  function place(event) {
    const x = Math.min(event.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8);
    const y = event.clientY + 14 + tooltip.offsetHeight > window.innerHeight ?
      event.clientY - tooltip.offsetHeight - 10 : event.clientY + 14;
    tooltip.style.left = Math.max(4, x) + "px";
    tooltip.style.top = Math.max(4, y) + "px";
  }

  opFilter.addEventListener("change", renderBody);
  boundFilter.addEventListener("change", renderBody);
  nameFilter.addEventListener("input", renderBody);
  if (analysisSelect) analysisSelect.addEventListener("change", () => chooseAnalysis(Number(analysisSelect.value)));
  chooseAnalysis(0);
})();
