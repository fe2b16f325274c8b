// tsmg view: the transcript browser of a report folder.
//
// Data files are scripts that call the callbacks below (a browser runs <script src> from a
// file:// page, where it would refuse fetch). The index (a few numbers per episode) loads at
// start; episode chunks load when an episode of theirs is shown. Text from a run only ever
// reaches the page through textContent and attribute setters: it is never parsed as HTML.
// (Past 600 lines: the list, search, episode and side-by-side views share the index, the chunk
// cache and the state in the URL; the learning curves live apart, in curves.js.)
"use strict";

(function () {
  // Columns of an index row (see tsmg/apps/view/data.py, EpisodeIndex).
  const RUN = 0, GAME = 1, OPTIONS = 2, SEED = 3, AGENTS = 4, MODELS = 5, SUCCESS = 6, RETURNS = 7,
    ERROR = 8, STEPS = 9, INVALID = 10, UPDATE = 11, CHUNK = 12, POSITION = 13, ISSUES = 14, ID_PREFIX = 15, ID_SUFFIX = 16;
  const CHUNK_CACHE = 40;          // chunks kept in memory (each at most a few hundred kB)
  const STEPS_PER_BATCH = 200;     // steps drawn at once in an episode view
  const COMPARE_CANDIDATES = 20;   // other episodes offered for a side-by-side
  const SEARCH_HITS = 500;         // a search stops after this many matching steps
  const SNIPPET_CHARS = 70;        // characters shown either side of a match

  let meta = null;
  const indexParts = [];
  let rows = [];
  const chunkStore = new Map();    // chunk number -> episodes (also an LRU: re-inserted on use)
  const chunkWaiters = new Map();  // chunk number -> promise
  const bySeedKey = new Map();     // "game|options|seed" -> row numbers
  let searchGeneration = 0;        // counts views: a search stops between chunks once another view is shown

  window.tsmgMeta = function (value) { meta = value; };
  window.tsmgIndex = function (part, value) { indexParts[part] = value; };
  window.tsmgChunk = function (number, episodes) { chunkStore.set(number, episodes); };

  const browser = document.getElementById("browser");

  // ------------------------------------------------------------------ DOM helpers (text only)
  function el(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else if (key === "onchange") node.addEventListener("change", value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function pre(text, className) {
    return el("pre", { class: className || null }, text === null || text === undefined ? "" : String(text));
  }

  function fmt(value, digits) {
    if (value === null || value === undefined || Number.isNaN(value)) return "n/a";
    return Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  function signed(value) {
    if (value === null || value === undefined) return "n/a";
    return (value >= 0 ? "+" : "") + fmt(value);
  }

  // ------------------------------------------------------------------ loading
  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = src;
      script.onload = () => { script.remove(); resolve(); };
      script.onerror = () => { script.remove(); reject(new Error("could not load " + src)); };
      document.head.append(script);
    });
  }

  function pad(number, width) { return String(number).padStart(width, "0"); }

  function loadChunk(number) {
    if (chunkStore.has(number)) {
      const episodes = chunkStore.get(number);
      chunkStore.delete(number);
      chunkStore.set(number, episodes);
      return Promise.resolve(episodes);
    }
    if (!chunkWaiters.has(number)) {
      const waiter = loadScript("data/e-" + pad(number, 5) + ".js").then(() => {
        chunkWaiters.delete(number);
        while (chunkStore.size > CHUNK_CACHE) chunkStore.delete(chunkStore.keys().next().value);
        if (!chunkStore.has(number)) throw new Error("data/e-" + pad(number, 5) + ".js holds no episodes");
        return chunkStore.get(number);
      }, (error) => { chunkWaiters.delete(number); throw error; });
      chunkWaiters.set(number, waiter);
    }
    return chunkWaiters.get(number);
  }

  function idOf(row) { return meta.id_prefixes[row[ID_PREFIX]] + row[ID_SUFFIX]; }

  function loadEpisode(rowNumber) {
    const row = rows[rowNumber];
    return loadChunk(row[CHUNK]).then((episodes) => episodes[row[POSITION]]);
  }

  async function start() {
    try {
      await loadScript("data/meta.js");
      for (let part = 0; part < meta.index_parts; part++) {
        browser.replaceChildren(el("p", { class: "loading" }, `Loading the episode index (${part + 1}/${meta.index_parts})…`));
        await loadScript("data/index-" + pad(part, 3) + ".js");
      }
    } catch (error) {
      browser.replaceChildren(el("p", { class: "error" }, "The report's data could not be loaded: " + error.message));
      return;
    }
    rows = indexParts.flat();
    rows.forEach((row, number) => {
      const key = row[GAME] + "|" + row[OPTIONS] + "|" + row[SEED];
      if (!bySeedKey.has(key)) bySeedKey.set(key, []);
      bySeedKey.get(key).push(number);
    });
    drawIntervals();
    window.addEventListener("hashchange", route);
    route();
  }

  // Summary tables carry their Wilson intervals as data attributes; draw them as small bars
  // (CSSOM styles: the page's Content-Security-Policy forbids inline style attributes).
  function drawIntervals() {
    for (const range of document.querySelectorAll(".ci-range")) {
      const low = Number(range.dataset.low), high = Number(range.dataset.high);
      range.style.left = (100 * low) + "%";
      range.style.width = Math.max(100 * (high - low), 0.5) + "%";
    }
    for (const point of document.querySelectorAll(".ci-point")) point.style.left = (100 * Number(point.dataset.at)) + "%";
  }

  // ------------------------------------------------------------------ state in the URL hash
  const FILTERS = ["run", "game", "model", "seat", "outcome", "invalid", "seed", "update", "issues", "q"];

  function readState() {
    const hash = location.hash.startsWith("#browse") ? location.hash.slice("#browse".length) : null;
    const params = new URLSearchParams(hash && hash.startsWith("?") ? hash.slice(1) : "");
    const state = {};
    for (const key of [...FILTERS, "page", "size", "ep", "step", "cmp"]) {
      if (params.has(key) && params.get(key) !== "") state[key] = params.get(key);
    }
    return { active: hash !== null, state };
  }

  function link(state) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) if (value !== undefined && value !== null && value !== "") params.set(key, value);
    const text = params.toString();
    return "#browse" + (text ? "?" + text : "");
  }

  function go(state) { location.hash = link(state); }

  function filtersOf(state) {
    const kept = {};
    for (const key of FILTERS) if (state[key] !== undefined) kept[key] = state[key];
    return kept;
  }

  // The page's sections are tabs: the header's links pick one (all show when scripts are off).
  function showTab(name) {
    for (const section of document.querySelectorAll("main > section")) section.hidden = section.id !== name;
    for (const anchor of document.querySelectorAll("header nav a")) {
      const target = anchor.getAttribute("href").slice(1).split("?")[0];
      anchor.classList.toggle("current", (target === "browse" ? "transcripts" : target) === name);
    }
    window.scrollTo(0, 0);
  }

  function route() {
    searchGeneration++;
    const { active, state } = readState();
    const tab = location.hash.slice(1);
    if (active) {
      showTab("transcripts");
      if (state.ep !== undefined && state.cmp !== undefined) showCompare(state);
      else if (state.ep !== undefined) showEpisode(state);
      else if (state.q !== undefined) showSearch(state);
      else showList(state);
      return;
    }
    const sections = [...document.querySelectorAll("main > section")].map((section) => section.id);
    showTab(sections.includes(tab) ? tab : ["summary", "training", "transcripts"].find((id) => sections.includes(id)));
    if (!browser.dataset.status) showList(state);
  }

  // ------------------------------------------------------------------ filtering
  function indexOf(table, name) { return name === undefined ? -1 : meta[table].indexOf(name); }

  // Seats of a row that the model and seat filters select.
  function focusSeats(row, model, seat) {
    const seats = [];
    for (let place = 0; place < row[AGENTS].length; place++) {
      if (model !== undefined && row[MODELS][place] !== model) continue;
      if (seat !== undefined && row[AGENTS][place] !== seat) continue;
      seats.push(place);
    }
    return seats;
  }

  function outcomeMatches(row, seats, outcome) {
    if (outcome === "error") return row[ERROR] === 1;
    if (row[ERROR] === 1) return false;
    const wanted = { success: 1, failure: 0, undefined: null }[outcome];
    return seats.some((place) => row[SUCCESS][place] === wanted);
  }

  // Matching episodes (row numbers), or with the invalid filter, matching invalid steps
  // ([row number, step position]) of the selected seats.
  function filter(state) {
    const run = state.run === undefined ? undefined : Number(state.run);
    const game = state.game === undefined ? undefined : indexOf("games", state.game);
    const model = state.model === undefined ? undefined : indexOf("models", state.model);
    const seat = state.seat === undefined ? undefined : indexOf("agents", state.seat);
    const seed = state.seed === undefined ? undefined : Number(state.seed);
    const update = state.update === undefined ? undefined : Number(state.update);
    const invalidOnly = state.invalid === "1";
    const items = [];
    for (let number = 0; number < rows.length; number++) {
      const row = rows[number];
      if (run !== undefined && row[RUN] !== run) continue;
      if (game !== undefined && row[GAME] !== game) continue;
      if (seed !== undefined && row[SEED] !== seed) continue;
      if (update !== undefined && row[UPDATE] !== update) continue;
      if (state.issues === "1" && !(row[ISSUES] > 0)) continue;
      const seats = focusSeats(row, model, seat);
      if (!seats.length) continue;
      if (state.outcome !== undefined && !outcomeMatches(row, seats, state.outcome)) continue;
      if (invalidOnly) {
        const agents = new Set(seats.map((place) => row[AGENTS][place]));
        for (const [step, agent] of row[INVALID]) if (agents.has(agent)) items.push([number, step]);
      } else {
        items.push(number);
      }
    }
    return items;
  }

  // ------------------------------------------------------------------ list view
  function select(name, label, options, current, state) {
    const control = el("select", { name, "data-filter": name, onchange: (event) => {
      const next = filtersOf(state);
      if (event.target.value === "") delete next[name]; else next[name] = event.target.value;
      go(next);
    } }, el("option", { value: "" }, "any"));
    for (const [value, text] of options) {
      control.append(el("option", { value, selected: String(value) === current ? "selected" : null }, text));
    }
    return el("label", {}, label + " ", control);
  }

  function filterBar(state) {
    const bar = el("form", { class: "filters" });
    bar.addEventListener("submit", (event) => event.preventDefault());
    if (meta.runs.length > 1) bar.append(select("run", "run", meta.runs.map((run, number) => [number, run.name]), state.run, state));
    bar.append(select("game", "game", meta.games.map((name) => [name, name]), state.game, state));
    bar.append(select("model", "model", meta.models.map((name) => [name, name]), state.model, state));
    bar.append(select("seat", "seat", meta.agents.map((name) => [name, name]), state.seat, state));
    bar.append(select("outcome", "outcome", [["success", "success"], ["failure", "failure"],
      ["undefined", "no success defined"], ["error", "failed to run"]], state.outcome, state));
    const updates = [...new Set(rows.map((row) => row[UPDATE]).filter((value) => value != null))].sort((a, b) => a - b);
    if (updates.length) bar.append(select("update", "update", updates.map((value) => [value, String(value)]), state.update, state));
    const seed = el("input", { type: "text", name: "seed", "data-filter": "seed", size: 10, value: state.seed || "", placeholder: "any" });
    seed.addEventListener("change", () => {
      const next = filtersOf(state);
      const value = seed.value.trim();
      if (value === "") delete next.seed; else next.seed = value;
      go(next);
    });
    bar.append(el("label", {}, "seed ", seed));
    const query = el("input", { type: "search", name: "q", "data-filter": "q", size: 24, value: state.q || "",
      placeholder: "text in any step" });
    query.addEventListener("change", () => {
      const next = filtersOf(state);
      if (query.value === "") delete next.q; else next.q = query.value;
      go(next);
    });
    bar.append(el("label", { class: "search" }, "search transcripts ", query));
    for (const [name, text] of [["invalid", "invalid answers only"], ["issues", "unreadable fields only"]]) {
      const box = el("input", { type: "checkbox", name, "data-filter": name, checked: state[name] === "1" ? "checked" : null });
      box.addEventListener("change", () => {
        const next = filtersOf(state);
        if (box.checked) next[name] = "1"; else delete next[name];
        go(next);
      });
      bar.append(el("label", { class: "check" }, box, " " + text));
    }
    bar.append(el("a", { href: "#browse", class: "reset" }, "clear filters"));
    return bar;
  }

  function pager(state, total, size) {
    const pages = Math.max(1, Math.ceil(total / size));
    const current = Math.min(Math.max(1, Number(state.page || 1)), pages);
    const to = (page) => link({ ...filtersOf(state), page, size: state.size });
    const nav = el("nav", { class: "pager", "data-page": current, "data-pages": pages },
      el("a", { href: to(1) }, "« first"), " ",
      el("a", { href: to(Math.max(1, current - 1)) }, "‹ previous"), " ",
      `page ${current} of ${pages}`, " ",
      el("a", { href: to(Math.min(pages, current + 1)), class: "next" }, "next ›"), " ",
      el("a", { href: to(pages) }, "last »"));
    const sizes = el("select", { name: "size", onchange: (event) => go({ ...filtersOf(state), size: event.target.value }) });
    for (const value of [25, 50, 100, 500]) sizes.append(el("option", { value, selected: value === size ? "selected" : null }, String(value)));
    nav.append(" ", el("label", {}, sizes, " per page"));
    return { nav, first: (current - 1) * size, current };
  }

  function seatsText(row) {
    return row[AGENTS].map((agent, place) => {
      const success = row[SUCCESS][place];
      const mark = success === 1 ? "✓" : success === 0 ? "✗" : "·";
      return `${meta.agents[agent]}=${meta.models[row[MODELS][place]]} ${mark} ${signed(row[RETURNS][place])}`;
    }).join("  ");
  }

  function showList(state) {
    browser.dataset.status = "loading";
    const items = filter(state);
    const size = Number(state.size || 50);
    const invalidOnly = state.invalid === "1";
    const { nav, first } = pager(state, items.length, size);
    const shown = items.slice(first, first + size);
    const what = invalidOnly ? "invalid answers" : "episodes";
    const count = el("p", { class: "count", "data-count": items.length }, `${items.length} ${what} match (of ${rows.length} episodes)`);
    const table = invalidOnly ? invalidTable(shown, state) : episodeTable(shown, state);
    browser.replaceChildren(filterBar(state), count, nav, table, nav.cloneNode(true));
    if (!invalidOnly) { browser.dataset.status = "ready"; return; }
    fillInvalidRows(table).then(() => { browser.dataset.status = "ready"; });
  }

  function episodeTable(numbers, state) {
    const multipleRuns = meta.runs.length > 1;
    const hasUpdates = numbers.some((number) => rows[number][UPDATE] != null);
    const head = el("tr", {}, multipleRuns ? el("th", {}, "run") : null, el("th", {}, "game"), el("th", {}, "seed"),
      hasUpdates ? el("th", {}, "update") : null, el("th", {}, "seats: model, outcome, return"),
      el("th", {}, "steps"), el("th", {}, "invalid"), el("th", {}, "episode"));
    const body = el("tbody");
    for (const number of numbers) {
      const row = rows[number];
      const flags = (row[ERROR] ? " failed" : "") + (row[ISSUES] ? " ⚠" : "");
      body.append(el("tr", { class: "episode-row", "data-row": number, "data-episode": idOf(row) },
        multipleRuns ? el("td", {}, meta.runs[row[RUN]].name) : null,
        el("td", {}, meta.games[row[GAME]]), el("td", {}, row[SEED] == null ? "?" : String(row[SEED])),
        hasUpdates ? el("td", {}, row[UPDATE] == null ? "" : String(row[UPDATE])) : null,
        el("td", { class: "seats" }, seatsText(row)), el("td", {}, String(row[STEPS])),
        el("td", {}, String(row[INVALID].length)),
        el("td", {}, el("a", { href: link({ ...filtersOf(state), ep: number }), class: "open" }, idOf(row)), flags)));
    }
    return el("table", { class: "episodes" }, el("thead", {}, head), body);
  }

  function invalidTable(items, state) {
    const head = el("tr", {}, el("th", {}, "game"), el("th", {}, "seed"), el("th", {}, "episode"), el("th", {}, "step"),
      el("th", {}, "agent (model)"), el("th", {}, "answer"), el("th", {}, "why invalid"));
    const body = el("tbody");
    for (const [number, step] of items) {
      const row = rows[number];
      body.append(el("tr", { class: "invalid-row", "data-row": number, "data-step": step, "data-episode": idOf(row) },
        el("td", {}, meta.games[row[GAME]]), el("td", {}, row[SEED] == null ? "?" : String(row[SEED])),
        el("td", {}, el("a", { href: link({ ...filtersOf(state), ep: number, step }), class: "open" }, idOf(row))),
        el("td", { class: "step-number" }, String(step)), el("td", { class: "agent" }, "…"),
        el("td", { class: "answer" }, "…"), el("td", { class: "reason" }, "…")));
    }
    return el("table", { class: "invalid" }, el("thead", {}, head), body);
  }

  async function fillInvalidRows(table) {
    for (const tr of table.querySelectorAll("tr.invalid-row")) {
      const number = Number(tr.dataset.row), position = Number(tr.dataset.step);
      let episode;
      try { episode = await loadEpisode(number); } catch (error) { tr.querySelector(".answer").textContent = error.message; continue; }
      const step = episode.steps[position];
      tr.querySelector(".agent").textContent = `${step.agent} (${episode.policies[step.agent] || "?"})`;
      tr.querySelector(".answer").replaceChildren(pre(step.completion ?? step.action ?? ""));
      tr.querySelector(".reason").textContent = step.reason || "";
    }
  }

  // ------------------------------------------------------------------ text search
  // The texts of a step a search reads, each with the name a result shows.
  function stepTexts(step) {
    const texts = [["answer", step.completion], ["action", step.action], ["move", step.parsed_action],
      ["why invalid", step.reason], ["thinking", step.reasoning], ["observation", step.observation]];
    for (const [role, content] of step.prompt || []) texts.push([role + " prompt", content]);
    return texts.filter(([, text]) => typeof text === "string" && text !== "");
  }

  // Every step that the filtered episodes' selected seats played (with the invalid filter: every
  // such invalid step) holding the text, case-insensitively, read chunk by chunk; stops after
  // SEARCH_HITS matching steps.
  async function showSearch(state) {
    const generation = searchGeneration;
    browser.dataset.status = "loading";
    const query = state.q.toLowerCase();
    const model = state.model === undefined ? undefined : indexOf("models", state.model);
    const seat = state.seat === undefined ? undefined : indexOf("agents", state.seat);
    const items = filter(state).map((item) => Array.isArray(item) ? item : [item, null]);
    const count = el("p", { class: "count" }, `Searching ${items.length} episodes…`);
    const list = el("ol", { class: "search-results" });
    browser.replaceChildren(filterBar(state), count, list);
    let hits = 0, searched = 0, next = 0, last = null;
    while (next < items.length && hits < SEARCH_HITS) {
      const chunk = rows[items[next][0]][CHUNK];
      let episodes;
      try { episodes = await loadChunk(chunk); } catch (error) {
        list.append(el("li", { class: "error" }, error.message));
        while (next < items.length && rows[items[next][0]][CHUNK] === chunk) next++;
        continue;
      }
      if (generation !== searchGeneration) return;
      for (; next < items.length && rows[items[next][0]][CHUNK] === chunk && hits < SEARCH_HITS; next++) {
        const [number, only] = items[next];
        const episode = episodes[rows[number][POSITION]];
        if (number !== last) { searched++; last = number; }
        const row = rows[number];
        const seats = new Set(focusSeats(row, model, seat).map((place) => meta.agents[row[AGENTS][place]]));
        episode.steps.forEach((step, position) => {
          if (hits >= SEARCH_HITS || (only !== null && position !== only) || !seats.has(step.agent)) return;
          const found = stepTexts(step).find(([, text]) => text.toLowerCase().includes(query));
          if (!found) return;
          hits++;
          list.append(searchHit(state, number, episode, step, position, found));
        });
      }
      count.textContent = `Searching: ${hits} matching steps in ${searched} of ${items.length} episodes…`;
    }
    const episodesTotal = new Set(items.map(([number]) => number)).size;
    const stopped = hits >= SEARCH_HITS && next < items.length;
    count.dataset.count = String(hits);
    count.textContent = `${hits} steps hold “${state.q}”` + (stopped
      ? ` (the first ${SEARCH_HITS}; search stopped at ${searched} of ${episodesTotal} episodes: narrow the filters or the text)`
      : ` (in ${episodesTotal} episodes searched)`);
    browser.dataset.status = "ready";
  }

  function searchHit(state, number, episode, step, position, [field, text]) {
    const at = text.toLowerCase().indexOf(state.q.toLowerCase());
    const from = Math.max(0, at - SNIPPET_CHARS), to = Math.min(text.length, at + state.q.length + SNIPPET_CHARS);
    const snippet = el("span", { class: "snippet" }, (from > 0 ? "…" : "") + text.slice(from, to) + (to < text.length ? "…" : ""));
    markMatches(snippet, state.q);
    return el("li", { class: "search-hit", "data-row": number, "data-episode": episode.episode_id, "data-step": position },
      el("a", { href: link({ ...filtersOf(state), ep: number, step: position }), class: "open" },
        `${episode.episode_id}, step ${step.index}`),
      ` · ${meta.runs[rows[number][RUN]].name} · ${step.agent} (${episode.policies[step.agent] || "?"}) · `,
      el("span", { class: "field" }, field), snippet);
  }

  // Wrap each occurrence of `query` (any case) in the text of `root`'s transcript parts in <mark>,
  // splitting text nodes (no markup is parsed); opens the folded parts holding one.
  function markMatches(root, query) {
    const needle = query.toLowerCase();
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, { acceptNode: (node) =>
      node.parentElement.closest("pre, .reason, .move, .choices, .snippet") ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT });
    const nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    for (const node of nodes) {
      let rest = node;
      let at = rest.data.toLowerCase().indexOf(needle);
      while (at >= 0) {
        const match = rest.splitText(at);
        rest = match.splitText(needle.length);
        match.replaceWith(el("mark", {}, match.data));
        at = rest.data.toLowerCase().indexOf(needle);
      }
    }
    for (const mark of root.querySelectorAll("mark")) {
      const folded = mark.closest("details");
      if (folded) folded.open = true;
    }
  }

  // ------------------------------------------------------------------ one episode
  function metaList(episode, row) {
    const items = [
      ["run", meta.runs[row[RUN]].name], ["game", episode.game_id],
      ["options", JSON.stringify(episode.game_options)], ["seed", episode.seed], ["group", episode.group_id],
      ["update", episode.update], ["rounds", episode.num_rounds],
      ["ended", episode.terminated ? "terminated" : episode.truncated ? "truncated (step limit)" : "—"],
      ["tokens in/out", `${episode.prompt_tokens ?? "?"}/${episode.completion_tokens ?? "?"}`],
      ["latency", episode.latency_s == null ? null : fmt(episode.latency_s, 3) + " s"],
      ["record version", episode.schema_version], ["error", episode.error],
    ];
    const list = el("dl", { class: "meta" });
    for (const [key, value] of items) if (value !== null && value !== undefined) list.append(el("dt", {}, key), el("dd", {}, String(value)));
    return list;
  }

  function seatTable(episode) {
    const body = el("tbody");
    for (const agent of episode.agents) {
      const success = episode.success[agent];
      // A win/draw/loss game's result (forfeits named); a goal game's success.
      const result = episode.outcomes ? episode.outcomes[agent]
        : success === true ? "success" : success === false ? "failure" : "n/a";
      body.append(el("tr", {}, el("td", {}, agent), el("td", {}, episode.policies[agent] || "?"),
        el("td", {}, signed(episode.returns[agent])), el("td", {}, result || "n/a")));
    }
    return el("table", { class: "seats" }, el("thead", {}, el("tr", {}, el("th", {}, "seat"), el("th", {}, "model"),
      el("th", {}, "return"), el("th", {}, "outcome"))), body);
  }

  function extraFields(extra, title) {
    const keys = Object.keys(extra || {});
    if (!keys.length) return null;
    const box = el("details", { class: "extra" }, el("summary", {}, `${title} (${keys.length}, not known to this viewer)`));
    for (const key of keys) box.append(el("div", {}, el("b", {}, key), pre(extra[key])));
    return box;
  }

  // A tool-using game's step: the call (name, typed arguments), the result the game returned, and what
  // the call used according to the episode's influence graph (support or failure, by field).
  function toolExchange(step) {
    if (!step.tool_call && !step.influence) return null;
    const box = el("div", { class: "tool-exchange" });
    if (step.tool_call) {
      const call = step.tool_call;
      const args = el("table", { class: "tool-args" });
      if (call.arguments && typeof call.arguments === "object") {
        for (const [key, value] of Object.entries(call.arguments)) {
          args.append(el("tr", {}, el("td", { class: "arg" }, key), el("td", { class: "type" }, typeof value === "number" ? "integer" : typeof value),
            el("td", {}, el("code", {}, JSON.stringify(value)))));
        }
      } else args.append(el("tr", {}, el("td", {}, el("code", {}, String(call.arguments ?? "")))));
      box.append(el("div", { class: "tool-call" }, el("h5", {}, "Tool call ", el("code", { class: "tool-name" }, call.name)), args));
    }
    if (step.tool_result) {
      const result = step.tool_result;
      box.append(el("div", { class: "tool-result" }, el("h5", {}, `Result (${result.kind} message) the game returned`),
        pre(result.text ?? "(the episode ended: no later observation shows it)")));
    }
    if (step.influence) {
      const used = el("ul", { class: "influence-used" });
      for (const edge of step.influence.used) {
        used.append(el("li", { class: "edge " + edge.kind },
          el("b", {}, edge.kind), ` ← ${edge.source} (${edge.source_kind}: ${edge.source_label}, step ${edge.source_step})`,
          edge.fields.length ? ` · fields ${edge.fields.join(", ")}` : ""));
      }
      if (!step.influence.used.length) used.append(el("li", {}, "nothing earlier (no edge into this action)"));
      box.append(el("div", { class: "influence" }, el("h5", {}, `Used (influence graph: ${step.influence.graph})`), used));
    }
    return box;
  }

  // The episode's influence graphs, one small table each: per action, what it used and the failures it built on.
  function influenceTables(episode) {
    const names = Object.keys(episode.influence || {});
    if (!names.length) return null;
    const box = el("div", { class: "influence-graphs" });
    for (const name of names) {
      const graph = episode.influence[name];
      const byId = new Map(graph.nodes.map((node) => [node.id, node]));
      const body = el("tbody");
      for (const action of graph.nodes.filter((node) => node.kind === "action")) {
        const into = graph.edges.filter((edge) => edge.target === action.id);
        const cell = (kind) => into.filter((edge) => edge.kind === kind)
          .map((edge) => `${edge.source} (${byId.get(edge.source).label}${edge.fields.length ? ": " + edge.fields.join(", ") : ""})`).join("; ") || "—";
        body.append(el("tr", { "data-action": action.id }, el("td", {}, String(action.step)), el("td", {}, action.id),
          el("td", {}, action.label), el("td", { class: "support" }, cell("support")), el("td", { class: "failure" }, cell("failure"))));
      }
      const messages = graph.nodes.length - body.children.length;
      box.append(el("h4", {}, `Influence graph (${name}): ${body.children.length} actions, ${messages} messages, ${graph.edges.length} edges`),
        el("table", { class: "influence-graph", "data-graph": name }, el("thead", {}, el("tr", {}, el("th", {}, "step"), el("th", {}, "action"),
          el("th", {}, "call"), el("th", {}, "support from"), el("th", {}, "failure from"))), body));
    }
    return box;
  }

  // A majority vote (--votes k): per attempt, each sampled answer beside the move it names, the tally
  // and the move played, so a reader sees how split the samples were and which answers were invalid.
  function voteBox(step) {
    if (!step.votes || !step.votes.length) return null;
    const box = el("div", { class: "votes" });
    step.votes.forEach((attempt, number) => {
      const title = `Vote of ${attempt.ballots.length} answers` + (step.votes.length > 1 ? ` (attempt ${number + 1} of ${step.votes.length})` : "");
      const tally = attempt.tally.map(([move, count]) => `${move} ×${count}`).join(", ") || "no valid answer";
      const played = attempt.played == null ? "no move: every answer was invalid" : `played ${attempt.played}`;
      const ballots = el("ol", { class: "ballots" });
      for (const ballot of attempt.ballots) {
        ballots.append(el("li", { class: ballot.move == null ? "ballot invalid" : "ballot" },
          ballot.move == null ? el("span", { class: "verdict bad" }, "✗ " + (ballot.reason || "invalid")) : el("span", { class: "move" }, "→ " + ballot.move),
          el("details", {}, el("summary", {}, "answer"), pre(ballot.answer))));
      }
      box.append(el("details", { class: "vote", open: "" }, el("summary", {}, el("b", {}, title), ` · ${tally} · ${played}`), ballots));
    });
    return box;
  }

  function stepCard(episode, step, position, highlighted, query) {
    const invalid = !step.valid;
    const card = el("article", { class: "step" + (invalid ? " invalid" : "") + (highlighted ? " highlighted" : ""),
      id: "step-" + position, "data-step": position, "data-index": step.index });
    const reward = step.reward == null ? "n/a" : (step.reward >= 0 ? "+" : "") + step.reward;
    card.append(el("header", {}, el("b", {}, `Step ${step.index}`),
      step.round == null ? "" : ` · round ${step.round}`, ` · ${step.agent} (${episode.policies[step.agent] || "?"})`,
      el("span", { class: "reward" }, ` reward ${reward}`)));
    if (step.model_observation == null) {
      card.append(el("div", { class: "observation" }, el("h5", {}, "Observation"), pre(step.observation, "board")));
    } else {
      // A compact view showed the model some lines only: what it saw first, the whole state second.
      card.append(el("div", { class: "observation model-view" },
        el("h5", {}, "Observation the model saw (the lines its prompt held)"), pre(step.model_observation || "(none of the lines below: see the prompt)", "board")));
      card.append(el("div", { class: "observation full-state" },
        el("h5", {}, "Full game state (more than the model saw)"), pre(step.observation, "board")));
    }
    if (step.prompt) {
      const prompt = el("details", { class: "prompt" }, el("summary", {}, `Prompt (${step.prompt.length} message${step.prompt.length === 1 ? "" : "s"})`));
      for (const [role, content] of step.prompt) prompt.append(el("div", { class: "message" }, el("span", { class: "role" }, role), pre(content)));
      card.append(prompt);
    }
    if (step.reasoning) {
      card.append(el("div", { class: "thinking" }, el("h5", {}, "Thinking" + (step.reasoning_tokens ? ` (${step.reasoning_tokens} tokens)` : "")),
        pre(step.reasoning)));
    }
    const answer = step.completion ?? step.action;
    card.append(el("div", { class: "answer" }, el("h5", {}, "Answer" + (step.attempts > 1 ? ` (after ${step.attempts} attempts)` : "")),
      pre(answer === null || answer === undefined ? "(none recorded)" : answer)));
    const verdict = invalid
      ? el("p", { class: "verdict bad" }, "✗ invalid: ", el("span", { class: "reason" }, step.reason || "no reason recorded"),
        step.parsed_action ? ` — played instead: ${step.parsed_action}` : "")
      : el("p", { class: "verdict good" }, "✓ move: ", el("span", { class: "move" }, step.parsed_action ?? step.action ?? "?"));
    card.append(verdict);
    const votes = voteBox(step);
    if (votes) card.append(votes);
    const tools = toolExchange(step);
    if (tools) card.append(tools);
    if (step.choices) card.append(el("p", { class: "choices" }, "offered: " + step.choices.join(" | ")));
    const counts = [];
    if (step.prompt_tokens != null) counts.push(`prompt ${step.prompt_tokens} tokens`);
    if (step.completion_tokens != null) counts.push(`answer ${step.completion_tokens} tokens`);
    for (const [key, value] of Object.entries(step.token_counts || {})) counts.push(`${key}: ${value}`);
    if (step.latency_s) counts.push(`${fmt(step.latency_s, 3)} s`);
    if (step.state_key) counts.push(`state ${step.state_key}`);
    if (counts.length) card.append(el("p", { class: "tokens" }, counts.join(" · ")));
    const extra = extraFields(step.extra, "Other fields");
    if (extra) card.append(extra);
    if (query) markMatches(card, query);
    return card;
  }

  function drawSteps(container, episode, highlight, query) {
    let drawn = 0;
    const more = el("button", { type: "button", class: "more" });
    const drawBatch = (until) => {
      const end = Math.min(episode.steps.length, until);
      for (; drawn < end; drawn++) container.insertBefore(stepCard(episode, episode.steps[drawn], drawn, drawn === highlight, query), more);
      if (drawn >= episode.steps.length) more.remove();
      else more.textContent = `show ${Math.min(STEPS_PER_BATCH, episode.steps.length - drawn)} more steps (${episode.steps.length - drawn} left)`;
    };
    more.addEventListener("click", () => drawBatch(drawn + STEPS_PER_BATCH));
    container.append(more);
    drawBatch(Math.max(STEPS_PER_BATCH, highlight === null ? 0 : highlight + 1));
  }

  function sameSeed(number) {
    const row = rows[number];
    return (bySeedKey.get(row[GAME] + "|" + row[OPTIONS] + "|" + row[SEED]) || []).filter((other) => other !== number);
  }

  async function showEpisode(state) {
    browser.dataset.status = "loading";
    const number = Number(state.ep);
    const row = rows[number];
    const back = el("a", { href: link({ ...filtersOf(state), page: state.page, size: state.size }), class: "back" }, "← back to the list");
    if (!row) { browser.replaceChildren(back, el("p", { class: "error" }, "No such episode in this report.")); return; }
    let episode;
    try { episode = await loadEpisode(number); } catch (error) {
      browser.replaceChildren(back, el("p", { class: "error" }, error.message)); return;
    }
    const view = el("div", { class: "episode", "data-episode": episode.episode_id });
    view.append(back, el("h3", {}, `Episode ${episode.episode_id}`), el("div", { class: "episode-head" }, metaList(episode, row), seatTable(episode)));
    if (episode.issues && episode.issues.length) {
      view.append(el("div", { class: "issues" }, el("b", {}, "⚠ Could not read everything in this record:"),
        el("ul", {}, episode.issues.map((issue) => el("li", {}, issue)))));
    }
    const extra = extraFields(episode.extra, "Other episode fields");
    if (extra) view.append(extra);
    const graphs = influenceTables(episode);
    if (graphs) view.append(graphs);
    const others = sameSeed(number).filter((other) => rows[other][MODELS].join() !== row[MODELS].join() || rows[other][RUN] !== row[RUN]);
    if (others.length) {
      const list = el("ul", { class: "compare" });
      for (const other of others.slice(0, COMPARE_CANDIDATES)) {
        list.append(el("li", {}, el("a", { href: link({ ...filtersOf(state), ep: number, cmp: other }), class: "side-by-side" },
          "side by side"), ` with ${idOf(rows[other])} (${meta.runs[rows[other][RUN]].name}): ${seatsText(rows[other])}`));
      }
      view.append(el("h4", {}, "Same game and seed, other models"), list);
    }
    const steps = el("div", { class: "steps" });
    view.append(el("h4", {}, `${episode.steps.length} steps`), steps);
    const highlight = state.step === undefined ? null : Number(state.step);
    drawSteps(steps, episode, highlight, state.q);
    browser.replaceChildren(view);
    if (highlight !== null) {
      const target = document.getElementById("step-" + highlight);
      if (target) target.scrollIntoView({ block: "center" });
    }
    browser.dataset.status = "ready";
  }

  // Two episodes side by side, their steps aligned by round (by position when rounds are unknown).
  async function showCompare(state) {
    browser.dataset.status = "loading";
    const numbers = [Number(state.ep), Number(state.cmp)];
    const back = el("a", { href: link({ ...filtersOf(state), ep: numbers[0] }), class: "back" }, "← back to the episode");
    let episodes;
    try { episodes = await Promise.all(numbers.map(loadEpisode)); } catch (error) {
      browser.replaceChildren(back, el("p", { class: "error" }, error.message)); return;
    }
    const keyed = episodes.map((episode) => {
      const byRound = new Map();
      episode.steps.forEach((step, position) => {
        const key = step.round == null ? position : step.round;
        if (!byRound.has(key)) byRound.set(key, []);
        byRound.get(key).push([step, position]);
      });
      return byRound;
    });
    const keys = [...new Set([...keyed[0].keys(), ...keyed[1].keys()])].sort((a, b) => a - b);
    const grid = el("div", { class: "compare-grid" });
    episodes.forEach((episode, side) => {
      grid.append(el("div", { class: "compare-head" }, el("h4", {}, episode.episode_id),
        el("p", {}, seatsText(rows[numbers[side]])), el("a", { href: link({ ...filtersOf(state), ep: numbers[side] }) }, "open alone")));
    });
    for (const key of keys.slice(0, 2 * STEPS_PER_BATCH)) {
      keyed.forEach((byRound, side) => {
        const cell = el("div", { class: "compare-cell", "data-round": key });
        for (const [step, position] of byRound.get(key) || []) cell.append(stepCard(episodes[side], step, position, false));
        grid.append(cell);
      });
    }
    browser.replaceChildren(el("div", { class: "compare-view" }, back,
      el("h3", {}, `Side by side: ${episodes[0].game_id}, seed ${episodes[0].seed}`), grid));
    browser.dataset.status = "ready";
  }

  start();
})();
