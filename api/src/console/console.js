// Cairn's console: draws the stack's resource graph (layered, left to
// right) as SVG and keeps node colours and the event timeline live from the
// server's event stream (Server-Sent Events; no polling loop here).
(function () {
  "use strict";
  const root = document.getElementById("stack");
  if (!root) return;
  const name = root.dataset.name;
  const base = "/console/api/stacks/" + encodeURIComponent(root.dataset.stack);
  const svgNS = "http://www.w3.org/2000/svg";
  const nodes = {};
  // A node's size and the gaps between columns and rows, in pixels.
  const W = 150, H = 34, GX = 44, GY = 14;

  function statusClass(s) {
    if (!s) return "none";
    if (s.endsWith("_FAILED")) return "failed";
    if (s.endsWith("_IN_PROGRESS")) return "progress";
    if (s.startsWith("DELETE_COMPLETE")) return "deleted";
    if (s.endsWith("_COMPLETE")) return "complete";
    return "none";
  }

  // A change set's page marks the resources it changes.
  const marks = JSON.parse(root.dataset.marks || "{}");

  function draw(graph) {
    const svg = document.getElementById("graph");
    const perLayer = {};
    graph.nodes.forEach(n => { (perLayer[n.layer] = perLayer[n.layer] || []).push(n); });
    let maxRows = 0;
    Object.keys(perLayer).forEach(l => { maxRows = Math.max(maxRows, perLayer[l].length); });
    const layers = Object.keys(perLayer).length;
    svg.setAttribute("width", Math.max(1, layers) * (W + GX));
    svg.setAttribute("height", Math.max(1, maxRows) * (H + GY));
    const pos = {};
    Object.keys(perLayer).forEach(l => perLayer[l].forEach((n, i) => {
      pos[n.id] = { x: l * (W + GX), y: i * (H + GY) };
    }));
    const frag = document.createDocumentFragment();
    graph.edges.forEach(([from, to]) => {
      const a = pos[from], b = pos[to];
      if (!a || !b) return;
      const line = document.createElementNS(svgNS, "line");
      line.setAttribute("x1", a.x + W); line.setAttribute("y1", a.y + H / 2);
      line.setAttribute("x2", b.x); line.setAttribute("y2", b.y + H / 2);
      line.setAttribute("class", "edge");
      frag.appendChild(line);
    });
    graph.nodes.forEach(n => {
      const g = document.createElementNS(svgNS, "g");
      const mark = marks[n.id] ? " change-" + marks[n.id] : "";
      g.setAttribute("class", "node " + statusClass(n.status) + mark);
      g.setAttribute("data-id", n.id);
      if (marks[n.id]) g.setAttribute("data-change", marks[n.id]);
      g.setAttribute("data-status", n.status || "");
      g.setAttribute("transform", "translate(" + pos[n.id].x + "," + pos[n.id].y + ")");
      const r = document.createElementNS(svgNS, "rect");
      r.setAttribute("width", W); r.setAttribute("height", H); r.setAttribute("rx", 5);
      const t = document.createElementNS(svgNS, "text");
      t.setAttribute("x", 8); t.setAttribute("y", 21);
      t.textContent = n.id;
      const title = document.createElementNS(svgNS, "title");
      title.textContent = n.id + " (" + n.type + ") " + (n.status || "") + (n.reason ? ": " + n.reason : "");
      g.appendChild(r); g.appendChild(t); g.appendChild(title);
      g.addEventListener("click", () => show(n.id));
      frag.appendChild(g);
      nodes[n.id] = { g: g, data: n, x: pos[n.id].x, y: pos[n.id].y };
    });
    svg.appendChild(frag);
  }

  function show(id) {
    const box = document.getElementById("detail");
    if (!nodes[id] || !box) return;
    // Read again: the latest status, a group's members as they move during
    // a rolling update, the properties as recorded, the last drift check.
    fetch(base + "/resources/" + encodeURIComponent(id)).then(r => r.json()).then(n => {
      box.textContent = "";
      box.dataset.id = n.id;
      const rows = [["Logical id", n.id], ["Type", n.type], ["Physical id", n.physical_id || ""],
        ["Status", n.status || ""], ["Reason", n.reason || ""]];
      if (n.rollout) {
        rows.push(["Rolling update", "batch " + (n.rollout.batches_done + 1) + " of " +
          n.rollout.batches + " to " + n.rollout.target]);
      }
      (n.members || []).forEach(m => {
        rows.push(["Member " + m.name, (m.status || "") + " " + (m.physical_id || "") +
          (m.reason ? " (" + m.reason + ")" : "")]);
      });
      if (n.drift) {
        rows.push(["Drift", n.drift.status]);
        n.drift.differences.forEach(d => {
          rows.push(["Drift " + d.PropertyPath, d.DifferenceType + ": expected " +
            d.ExpectedValue + ", actual " + d.ActualValue]);
        });
      }
      rows.forEach(([k, v]) => {
        const dt = document.createElement("dt"); dt.textContent = k;
        const dd = document.createElement("dd"); dd.textContent = v;
        box.appendChild(dt); box.appendChild(dd);
      });
      if (n.properties) {
        const dt = document.createElement("dt"); dt.textContent = "Properties";
        const pre = document.createElement("pre"); pre.className = "properties";
        pre.textContent = JSON.stringify(n.properties, null, 2);
        const dd = document.createElement("dd"); dd.appendChild(pre);
        box.appendChild(dt); box.appendChild(dd);
      }
    });
  }

  // While the stack's operation runs, the graph's box scrolls to keep the
  // resource that just started in view (a wide stack does not fit).
  function follow(n, status) {
    const stackStatus = (document.getElementById("status") || {}).textContent || "";
    if (!status.endsWith("_IN_PROGRESS") || !stackStatus.endsWith("_IN_PROGRESS")) return;
    const box = document.querySelector(".graph-box");
    if (!box) return;
    // The column before stays in view: what just finished.
    if (n.x < box.scrollLeft || n.x + W > box.scrollLeft + box.clientWidth) {
      box.scrollLeft = Math.max(0, n.x - W - GX - 12);
    }
    if (n.y < box.scrollTop || n.y + H > box.scrollTop + box.clientHeight) {
      box.scrollTop = Math.max(0, n.y - H - GY);
    }
  }

  let seen = 0;
  // Events shown: the last PAGE when the page opens, older ones a page at
  // a time ("Older events"), so a stack with a long history opens at once.
  const PAGE = 100;
  let oldest = 0;

  function eventItem(ev) {
    const li = document.createElement("li");
    li.className = statusClass(ev.status);
    li.dataset.logicalId = ev.logical_id;
    li.textContent = ev.timestamp + "  " + ev.status + "  " + ev.logical_id +
      "  " + ev.resource_type + (ev.status_reason ? "  " + ev.status_reason : "");
    return li;
  }

  function showOlder() {
    const button = document.getElementById("older");
    if (!button) return;
    button.hidden = oldest <= 0;
    button.textContent = "Older events (" + oldest + ")";
  }

  function loadOlder() {
    const skip = Math.max(0, oldest - PAGE);
    fetch(base + "/events/page?skip=" + skip + "&limit=" + (oldest - skip))
      .then(r => r.json()).then(page => {
        const list = document.getElementById("events");
        // Oldest first from the server; the list is newest first.
        page.events.slice().reverse().forEach(ev => list.appendChild(eventItem(ev)));
        oldest = skip;
        showOlder();
      });
  }

  // The resource table: live status, sorting and filtering.
  const table = document.getElementById("resources");

  function updateRow(ev) {
    if (!table || ev.resource_type === "AWS::CloudFormation::Stack" && ev.logical_id === name) return;
    const row = table.querySelector("tr[data-logical-id='" + CSS.escape(ev.logical_id) + "']");
    if (!row) return;
    const cell = c => row.querySelector("td." + c);
    cell("status").textContent = ev.status;
    cell("status").className = "status " + statusClass(ev.status);
    cell("reason").textContent = ev.status_reason || "";
    cell("updated").textContent = ev.timestamp;
    if (ev.physical_id) cell("physical").textContent = ev.physical_id;
    const failed = ev.status.endsWith("_FAILED");
    row.classList.toggle("failed-row", failed);
    let mark = row.querySelector(".failed-mark");
    if (failed && !mark) {
      mark = document.createElement("span");
      mark.className = "failed-mark";
      mark.title = "failed in the last operation";
      mark.setAttribute("aria-label", "failed");
      mark.textContent = "✖ ";
      cell("logical").insertBefore(mark, cell("logical").firstChild);
    } else if (!failed && mark) {
      mark.remove();
    }
  }

  if (table) {
    const filter = document.getElementById("resource-filter");
    if (filter) filter.addEventListener("input", () => {
      const words = filter.value.toLowerCase().split(/\s+/).filter(w => w);
      let shown = 0;
      table.querySelectorAll("tbody tr").forEach(row => {
        const text = row.textContent.toLowerCase();
        const keep = words.every(w => text.includes(w));
        row.hidden = !keep;
        if (keep) shown += 1;
      });
      const count = document.getElementById("resource-count");
      if (count) count.textContent = shown + " of " + table.tBodies[0].rows.length + " resources";
    });
    table.querySelectorAll("th button[data-sort]").forEach(button => {
      button.addEventListener("click", () => {
        const th = button.parentElement;
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("th").forEach(h => h.setAttribute("aria-sort", "none"));
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const key = button.dataset.sort;
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort((a, b) => {
          const x = a.querySelector("td." + key).textContent;
          const y = b.querySelector("td." + key).textContent;
          return ascending ? x.localeCompare(y) : y.localeCompare(x);
        });
        rows.forEach(r => body.appendChild(r));
      });
    });
  }

  function onEvent(e) {
    const ev = JSON.parse(e.data);
    seen += 1;
    const list = document.getElementById("events");
    list.insertBefore(eventItem(ev), list.firstChild);
    updateRow(ev);
    const n = nodes[ev.logical_id];
    if (n) {
      n.data.status = ev.status; n.data.reason = ev.status_reason || "";
      if (ev.physical_id) n.data.physical_id = ev.physical_id;
      const mark = marks[ev.logical_id] ? " change-" + marks[ev.logical_id] : "";
      n.g.setAttribute("class", "node " + statusClass(ev.status) + mark);
      n.g.setAttribute("data-status", ev.status);
      if (seen > history) follow(n, ev.status);
    }
    if (ev.resource_type === "AWS::CloudFormation::Stack" && ev.logical_id === name) {
      const s = document.getElementById("status");
      if (s) { s.textContent = ev.status; s.className = "status " + statusClass(ev.status); }
    }
  }

  // Events already recorded when the page opened are history: they colour
  // the nodes but do not move the graph's view.
  let history = 0;

  fetch(base + "/graph").then(r => r.json()).then(graph => {
    const start = performance.now();
    history = graph.event_count || 0;
    draw(graph);
    // Layout and paint are done by the next frame (what the benchmark of a
    // 1,000-resource graph reads, in milliseconds since navigation start);
    // the event stream opens then, so the graph shows before the history
    // of a large stack is replayed.
    requestAnimationFrame(() => setTimeout(() => {
      window.cairnGraphDrawn = { nodes: graph.nodes.length, draw_ms: performance.now() - start,
        since_navigation_ms: performance.now() };
      oldest = Math.max(0, history - PAGE);
      seen = oldest;
      showOlder();
      const older = document.getElementById("older");
      if (older) older.addEventListener("click", loadOlder);
      const source = new EventSource(base + "/events?from=" + oldest);
      source.addEventListener("stack-event", onEvent);
    }, 0));
  });
})();
