// tscube view: the map of a result (Leaflet over the server's PNG tiles) and the pixel panel.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const state = { info: null, layer: null, map: null, tiles: null, loaded: false, pixel: null, shown: null,
                  hoverKey: null, hoverTimer: null, request: 0 };

  function fmt(value) {
    if (value === null || value === undefined) return "–";
    if (typeof value === "number") {
      if (Number.isInteger(value)) return String(value);
      const a = Math.abs(value);
      return a !== 0 && (a < 1e-3 || a >= 1e5) ? value.toExponential(3) : value.toPrecision(4).replace(/\.?0+$/, "");
    }
    if (typeof value === "object") return JSON.stringify(value);
    return String(value);
  }

  function fmtLayer(layer, value) {
    return layer.colouring === "year" && typeof value === "number" ? value.toFixed(3) : fmt(value);
  }

  function message(text, kind) {
    const box = $("message");
    box.hidden = !text;
    box.textContent = text || "";
    box.className = "message" + (kind === "error" ? " error" : "");
    if (text) (kind === "error" ? console.error : console.warn)("tscube view: " + text);
  }

  function rows(table, pairs) {
    table.replaceChildren(...pairs.map(([k, v]) => {
      const tr = document.createElement("tr");
      const a = document.createElement("td"); a.textContent = k;
      const b = document.createElement("td"); b.textContent = fmt(v);
      tr.append(a, b);
      return tr;
    }));
  }

  // --- the URL: layer, view and pixel, so that a view can be shared and reopened -----------
  function readHash() {
    const out = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const [k, v] = part.split("=");
      if (k) out[decodeURIComponent(k)] = decodeURIComponent(v || "");
    }
    return out;
  }

  function writeHash() {
    if (!state.map) return;
    const z = state.info.zoom;
    const c = state.map.project(state.map.getCenter(), z);
    const parts = ["layer=" + encodeURIComponent(state.layer), "zoom=" + state.map.getZoom(),
                   "center=" + Math.floor(c.y) + "," + Math.floor(c.x)];
    if (state.pixel) parts.push("pixel=" + state.pixel[0] + "," + state.pixel[1]);
    history.replaceState(null, "", "#" + parts.join("&"));
  }

  // --- pixels <-> map ------------------------------------------------------------------
  function pixelAt(latlng) {
    const p = state.map.project(latlng, state.info.zoom);
    return [Math.floor(p.y), Math.floor(p.x)];
  }

  function inside(row, col) {
    const [h, w] = state.info.shape;
    return row >= 0 && col >= 0 && row < h && col < w;
  }

  function mapCoords(row, col) {
    const c = state.info.coords;
    if (!c || !c.x || !c.y) return null;
    return [c.x.first + col * c.x.step, c.y.first + row * c.y.step];
  }

  // --- layers and legends ------------------------------------------------------------------
  function setLayer(name) {
    state.layer = name;
    for (const input of document.querySelectorAll("#layers input")) input.checked = input.value === name;
    state.loaded = false;
    state.tiles.setUrl("/api/tile/" + encodeURIComponent(name) + "/{z}/{x}/{y}.png");
    fetch("/api/legend/" + encodeURIComponent(name)).then((r) => r.json()).then(showLegend)
      .catch((e) => message("legend of " + name + ": " + e, "error"));
    writeHash();
  }

  function showLegend(legend) {
    const box = $("legend");
    box.replaceChildren();
    if (legend.error) { message(legend.error, "error"); return; }
    if (legend.kind === "continuous") {
      const ramp = document.createElement("div");
      ramp.className = "ramp";
      ramp.style.background = "linear-gradient(to right, " + legend.stops.join(", ") + ")";
      const labels = document.createElement("div");
      labels.className = "ramp-labels";
      for (const v of [legend.min, (legend.min + legend.max) / 2, legend.max]) {
        const s = document.createElement("span"); s.textContent = fmt(v); labels.append(s);
      }
      box.append(ramp, labels);
    }
    const entries = document.createElement("div");
    entries.className = "entries";
    for (const e of (legend.entries || []).concat(legend.greys || [])) {
      const item = document.createElement("div");
      const sw = document.createElement("span"); sw.className = "swatch"; sw.style.background = e.colour;
      item.append(sw, document.createTextNode(e.label));
      entries.append(item);
    }
    box.append(entries);
    box.dataset.layer = legend.name;
  }

  // --- hover: every layer's value under the pointer ----------------------------------------
  function hover(e) {
    const [row, col] = pixelAt(e.latlng);
    const box = $("hover");
    if (!inside(row, col)) { box.hidden = true; state.hoverKey = null; return; }
    const key = row + "," + col;
    if (key === state.hoverKey) return;
    state.hoverKey = key;
    clearTimeout(state.hoverTimer);
    state.hoverTimer = setTimeout(() => {
      fetch("/api/values?row=" + row + "&col=" + col).then((r) => r.json()).then((d) => {
        if (state.hoverKey !== key) return;
        const xy = mapCoords(row, col);
        const lines = ["row " + row + ", col " + col + (xy ? "  (x " + fmt(xy[0]) + ", y " + fmt(xy[1]) + ")" : "")];
        for (const layer of state.info.layers) {
          let v = d.values ? d.values[layer.name] : null;
          if (layer.name === "status" && d.status) v = d.status.name;
          lines.push((layer.name === state.layer ? "▸ " : "  ") + layer.title + ": " + fmtLayer(layer, v));
        }
        box.textContent = "";
        for (const line of lines) { const div = document.createElement("div"); div.textContent = line; box.append(div); }
        box.hidden = false;
      }).catch(() => {});
    }, 40);
  }

  // --- the pixel panel -------------------------------------------------------------------
  function selectPixel(row, col) {
    row = Number(row); col = Number(col);
    if (!inside(row, col)) return;
    state.pixel = [row, col];
    state.shown = null;
    const z = state.info.zoom;
    const bounds = L.latLngBounds(state.map.unproject([col, row + 1], z), state.map.unproject([col + 1, row], z));
    if (state.marker) state.marker.setBounds(bounds);
    else state.marker = L.rectangle(bounds, { color: "#000", weight: 2, fill: false, interactive: false }).addTo(state.map);
    const panel = $("pixel");
    panel.hidden = false;
    const xy = mapCoords(row, col);
    $("pixel-title").textContent = "Pixel row " + row + ", col " + col + (xy ? " (x " + fmt(xy[0]) + ", y " + fmt(xy[1]) + ")" : "");
    $("pixel-status").textContent = "loading…";
    $("pixel-breaks").replaceChildren();
    $("pixel-error").hidden = true;
    $("pixel-figure").hidden = true;
    writeHash();
    const request = ++state.request;
    fetch("/api/pixel?row=" + row + "&col=" + col).then((r) => r.json()).then((d) => {
      if (request !== state.request) return;
      showPixel(d, row, col);
    }).catch((e) => {
      if (request !== state.request) return;
      pixelError("pixel row " + row + ", col " + col + ": " + e, row, col);
    });
    setTimeout(() => {  // the panel took room from the map: keep the pixel in view
      state.map.invalidateSize({ animate: false });
      if (!state.map.getBounds().contains(bounds.getCenter())) state.map.panTo(bounds.getCenter(), { animate: false });
    }, 0);
  }

  function centreOn(row, col) {
    state.map.panTo(state.map.unproject([col + 0.5, row + 0.5], state.info.zoom), { animate: false });
  }

  function pixelError(text, row, col) {
    const box = $("pixel-error");
    box.textContent = text;
    box.className = "message error";
    box.hidden = false;
    console.error("tscube view: " + text);
    state.shown = [row, col];
  }

  function showPixel(d, row, col) {
    if (d.error) { $("pixel-status").textContent = ""; pixelError(d.error, row, col); return; }
    const status = $("pixel-status");
    status.replaceChildren();
    if (d.status) {
      const name = document.createElement("span"); name.className = "status-name"; name.textContent = "Status " + d.status.name;
      status.append(name, document.createTextNode(d.status.text ? ": " + d.status.text : ""));
    }
    const list = $("pixel-breaks");
    const breaks = d.breaks || [];
    if (state.info.kind !== "stl" && state.info.kind !== "cluster") {
      if (!breaks.length) {
        const li = document.createElement("li"); li.className = "no-break"; li.textContent = "no break"; list.append(li);
      }
      for (const b of breaks) {
        const li = document.createElement("li");
        li.className = "break";
        li.dataset.time = b.time;
        li.dataset.date = b.date;
        li.textContent = b.kind + " at " + b.date + " (" + b.time.toFixed(3) + ")";
        list.append(li);
      }
    }
    const pairs = state.info.layers.map((l) => [l.title, l.name === "status" && d.status ? d.status.name :
                                                 fmtLayer(l, d.values[l.name])]);
    rows($("pixel-values"), pairs);
    if (d.figure_error) {
      pixelError(d.figure_error, row, col);
    } else if (d.figure) {
      const img = $("pixel-figure");
      img.onload = () => { state.shown = [row, col]; };
      img.src = d.figure;
      img.hidden = false;
    } else {
      state.shown = [row, col];
    }
    state.details = d;
  }

  // --- start ---------------------------------------------------------------------------
  async function start() {
    let info;
    try {
      const response = await fetch("/api/info");
      info = await response.json();
      if (info.error) throw new Error(info.error);
    } catch (e) {
      message("cannot load the result: " + e.message, "error");
      return;
    }
    state.info = info;
    document.title = "tscube view: " + info.title;
    $("title").textContent = info.title;
    $("kind").textContent = info.kind.replace("_", " ") + " · " + info.shape[0] + " × " + info.shape[1] + " pixels" +
                            (info.crs ? " · " + info.crs : "");
    if (info.cube_problem) message(info.cube_problem, "warning");
    const form = $("layers");
    for (const layer of info.layers) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.type = "radio"; input.name = "layer"; input.value = layer.name;
      input.addEventListener("change", () => setLayer(layer.name));
      label.append(input, document.createTextNode(" " + layer.title));
      form.append(label);
    }
    const summary = Object.entries(info.summary || {}).filter(([k]) => k !== "sessions");
    if (info.cube || info.input) summary.push(["cube", info.cube || info.input]);
    rows($("summary"), summary.map(([k, v]) => [k.replace(/_/g, " "), typeof v === "object" && v !== null ?
      Object.entries(v).map(([a, b]) => a + ": " + b).join(", ") : v]));
    rows($("params"), Object.entries(info.params || {}));

    const z = info.zoom;
    const map = L.map("map", { crs: L.CRS.Simple, minZoom: -3, maxZoom: z + 6, zoomSnap: 1, attributionControl: false });
    state.map = map;
    const [h, w] = info.shape;
    const bounds = L.latLngBounds(map.unproject([0, h], z), map.unproject([w, 0], z));
    const tiles = L.tileLayer("", { tileSize: info.tile, minNativeZoom: 0, maxNativeZoom: z, minZoom: -3, maxZoom: z + 6,
                                    bounds: bounds, noWrap: true, keepBuffer: 1 });
    tiles.on("loading", () => { state.loaded = false; });
    tiles.on("load", () => { state.loaded = true; });
    tiles.on("tileerror", (e) => console.error("tscube view: tile failed", e.coords));
    state.tiles = tiles;
    const hash = readHash();
    const names = info.layers.map((l) => l.name);
    const layer = names.includes(hash.layer) ? hash.layer : names[0];
    if (hash.zoom !== undefined && hash.center) {
      const [r, c] = hash.center.split(",").map(Number);
      map.setView(map.unproject([c, r], z), Number(hash.zoom));
    } else {
      map.fitBounds(bounds);
    }
    tiles.addTo(map);
    setLayer(layer);
    L.rectangle(bounds, { color: "#888", weight: 1, fill: false, interactive: false }).addTo(map);
    // the pixel panel opens, grows with its figure and closes: the map follows its container's size
    new ResizeObserver(() => map.invalidateSize({ animate: false })).observe($("map"));
    map.on("mousemove", hover);
    map.on("mouseout", () => { $("hover").hidden = true; state.hoverKey = null; });
    map.on("click", (e) => { const [r, c] = pixelAt(e.latlng); if (inside(r, c)) selectPixel(r, c); });
    map.on("moveend", writeHash);
    $("pixel-close").addEventListener("click", () => {
      $("pixel").hidden = true; state.pixel = null;
      if (state.marker) { state.marker.remove(); state.marker = null; }
      writeHash(); setTimeout(() => map.invalidateSize(), 0);
    });
    if (hash.pixel) {
      const [r, c] = hash.pixel.split(",").map(Number);
      selectPixel(r, c);
    }
  }

  window.tscubeView = {
    get info() { return state.info; },
    get layer() { return state.layer; },
    get details() { return state.details; },
    tilesLoaded: () => state.loaded && !!state.tiles && !state.tiles.isLoading(),
    selectPixel: selectPixel,
    centreOn: centreOn,
    setLayer: setLayer,
    pixelShown: (row, col) => !!state.shown && state.shown[0] === row && state.shown[1] === col,
    pixelToScreen: (row, col) => {
      const p = state.map.latLngToContainerPoint(state.map.unproject([col + 0.5, row + 0.5], state.info.zoom));
      const r = $("map").getBoundingClientRect();
      return [p.x + r.left, p.y + r.top];
    },
  };
  start();
})();
